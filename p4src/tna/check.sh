#!/usr/bin/env bash
# The TNA program through p4c's front and mid end (p4test) for Tofino 1 (tna.p4) and
# Tofino 2 (t2na.p4), then a check that the committed Tofino-shaped P4Info is current,
# then the tables' SRAM/TCAM estimate against one pipe (resources.py --check),
# then the full Tofino compile where bf-p4c is installed (compile-tofino.sh).
# Run by `make p4` (p4src/build.sh) and on its own: p4src/tna/check.sh
#
# Exit status: 0 checked, 1 failed, 3 skipped (p4test or the TNA includes are missing).
# TNA_INCLUDE=DIR overrides where tna.p4 / t2na.p4 are looked for.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The prebuilt toolchain of the CI machines lives in /opt/p4tools (as in p4src/build.sh).
[ -d /opt/p4tools/bin ] && PATH="/opt/p4tools/bin:$PATH"

p4test=$(command -v p4test || true)
inc=${TNA_INCLUDE:-}
if [ -z "$inc" ] && [ -n "$p4test" ]; then
    inc="$(dirname "$p4test")/../share/p4c/p4include/tofino-arch"
fi
if [ -z "$p4test" ]; then
    echo "p4 tna: SKIPPED — p4test (p4c's front/mid end) is not installed"
    exit 3
fi
if [ ! -f "$inc/tna.p4" ] || [ ! -f "$inc/t2na.p4" ]; then
    echo "p4 tna: SKIPPED — no tna.p4/t2na.p4 in $inc (p4c's Tofino backend includes;" \
         "set TNA_INCLUDE=DIR to point at them)"
    exit 3
fi

# Warnings that are expected, each with its reason; any other warning fails the check.
# - CPU_PORT (BMv2's 255) and LEARN_DIGEST_RECEIVER (v1model's digest() receiver) are
#   v1model-only constants in p4src/common/defines.p4; TNA uses TNA_CPU_PORT and a Digest.
# - The ingress parser leaves its `out` metadata to LookupMdInit (see include/parser.p4).
allowed="'CPU_PORT' is unused|'LEARN_DIGEST_RECEIVER' is unused|out parameter 'meta' may be uninitialized when 'SupergwIngressParser' terminates"

prog=p4src/tna/supergw.p4
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in 1 2; do
    if ! "$p4test" "-D__TARGET_TOFINO__=$target" -I "$inc" "$prog" >"$log" 2>&1; then
        cat "$log" >&2
        echo "p4 tna: FAILED — p4test rejected $prog for Tofino $target (errors above)" >&2
        exit 1
    fi
    unexpected=$(grep -E 'warning:' "$log" | grep -Ev "$allowed" || true)
    if [ -n "$unexpected" ]; then
        cat "$log" >&2
        echo "p4 tna: FAILED — unexpected p4test warnings for Tofino $target:" >&2
        echo "$unexpected" >&2
        echo "(fix them, or add them with a reason to 'allowed' in p4src/tna/check.sh)" >&2
        exit 1
    fi
    echo "p4 tna: p4test accepted $prog for Tofino $target (__TARGET_TOFINO__=$target)," \
         "0 errors, $(grep -c 'warning:' "$log" || true) expected warnings"
done

py=.venv/bin/python
[ -x "$py" ] || py=python3
shape=p4src/tna/supergw.tofino-shape.p4info.txtpb
out=build/p4/tna
mkdir -p "$out"
if ! "$py" -c "import finsy.proto, google.protobuf" 2>/dev/null; then
    echo "p4 tna: Tofino-shaped P4Info check SKIPPED — $py lacks finsy/protobuf (run make deps)"
else
    "$py" p4src/tna/tofino_p4info.py --p4test "$p4test" --include "$inc" "$out/supergw.tofino-shape.p4info.txtpb"
    if ! diff -u "$shape" "$out/supergw.tofino-shape.p4info.txtpb"; then
        echo "p4 tna: FAILED — $shape is stale (diff above). If the P4 change is intended:" \
             "cp $out/supergw.tofino-shape.p4info.txtpb $shape" >&2
        exit 1
    fi
    echo "p4 tna: $shape is current"
    # The tables' sizes (p4src/common/size.p4) must fit one Tofino 1 pipe's SRAM and TCAM.
    if ! "$py" p4src/tna/resources.py --check "$shape" >"$out/resources.md"; then
        echo "p4 tna: FAILED — the tables do not fit a Tofino 1 pipe (estimate above; $out/resources.md)" >&2
        exit 1
    fi
    echo "p4 tna: the tables fit a Tofino 1 pipe by p4src/tna/resources.py's estimate:" \
         "$(grep -o '\*\*[0-9]*\*\* of [0-9]* ([0-9.]* %)' "$out/resources.md" | head -1 | tr -d '*') SRAM"
fi

rc=0
p4src/tna/compile-tofino.sh || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || exit "$rc"
