#!/usr/bin/env bash
# Compile p4src with p4c (BMv2, v1model) and check that the committed P4Info is exactly
# what p4c generates. Without p4c (no registry packages it) this is skipped: the unit
# test controller/tests/test_p4info_contract.py checks the P4Info against the sources.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v p4c >/dev/null 2>&1; then
    echo "p4: skipped — p4c is not installed (the committed P4Info is checked by the unit tests)"
    exit 0
fi

out=build/p4
mkdir -p "$out"
p4c --target bmv2 --arch v1model \
    --p4runtime-files "$out/supergw.p4info.txtpb" \
    -o "$out" p4src/v1model/supergw.p4
echo "p4: compiled $out/supergw.json"

py=.venv/bin/python
[ -x "$py" ] || py=python3
"$py" p4src/p4info_diff.py p4src/v1model/supergw.p4info.txtpb "$out/supergw.p4info.txtpb"
