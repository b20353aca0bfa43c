#!/usr/bin/env bash
# `make p4`: compile p4src with p4c (BMv2, v1model) into build/p4 and check that the
# committed P4Info is byte for byte what p4c generates. Any compiler warning fails the
# build (--Werror). Without p4c this is skipped, loudly; the unit test
# controller/tests/test_p4info_contract.py still checks the P4Info against the sources.
#
# Exit status: 0 compiled and identical, 1 failed, 3 skipped (p4c not installed).
# --junit FILE also writes the outcome as one JUnit case (make test's summary counts it).
set -euo pipefail
cd "$(dirname "$0")/.."

junit=""
case "${1:-}" in
    --junit) junit="${2:?--junit needs a file}" ;;
    "") ;;
    *) echo "usage: p4src/build.sh [--junit FILE]" >&2; exit 2 ;;
esac
# report pass|fail|skip MESSAGE: print it and, with --junit, record it.
report() {
    local kind=$1 msg=$2 body=""
    case "$kind" in
        pass) echo "p4: $msg" ;;
        fail) echo "p4: FAILED — $msg" >&2 ;;
        skip) echo "p4: SKIPPED — $msg" >&2 ;;
    esac
    [ -n "$junit" ] || return 0
    msg=${msg//&/&amp;}; msg=${msg//</&lt;}; msg=${msg//>/&gt;}; msg=${msg//\"/&quot;}
    case "$kind" in
        fail) body="<failure message=\"$msg\"/>" ;;
        skip) body="<skipped message=\"$msg\"/>" ;;
    esac
    mkdir -p "$(dirname "$junit")"
    printf '<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="p4" tests="1">\n  <testcase classname="p4" name="compile_and_p4info_identical">%s</testcase>\n</testsuite>\n' \
        "$body" >"$junit"
}

# p4lang's packages and a source build install to /usr or /usr/local; the prebuilt
# toolchain of the CI machines lives in /opt/p4tools.
[ -d /opt/p4tools/bin ] && PATH="/opt/p4tools/bin:$PATH"

if ! command -v p4c >/dev/null 2>&1; then
    report skip "p4c is not installed (see p4src/README.md, 'Get p4c and BMv2'); the committed P4Info is only checked against the sources by the unit tests"
    exit 3
fi

committed=p4src/v1model/supergw.p4info.txtpb
out=build/p4
# No stale JSON survives a failed compile: PTF on BMv2 must not test an old program.
rm -rf "$out"
mkdir -p "$out"
echo "p4: $(p4c --version 2>&1 | head -n1)"
if ! p4c --target bmv2 --arch v1model --Werror \
        --p4runtime-files "$out/supergw.p4info.txtpb" \
        -o "$out" p4src/v1model/supergw.p4; then
    rm -f "$out/supergw.json"
    report fail "p4c rejected p4src/v1model/supergw.p4 (output above; warnings count as errors)"
    exit 1
fi
echo "p4: compiled $out/supergw.json"

if ! diff -u "$committed" "$out/supergw.p4info.txtpb"; then
    py=.venv/bin/python
    [ -x "$py" ] || py=python3
    "$py" p4src/p4info_diff.py "$committed" "$out/supergw.p4info.txtpb" >&2 || true
    report fail "$committed is not p4c's output (diff above). If the P4 change is intended: cp $out/supergw.p4info.txtpb $committed && make constants"
    exit 1
fi
report pass "$committed is identical to p4c's output"

# The TNA (Tofino) twin: p4test for Tofino 1 and 2, the Tofino-shaped P4Info, and bf-p4c
# where installed (p4src/tna/check.sh; it says what it skipped).
rc=0
p4src/tna/check.sh || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
    report fail "p4src/tna/check.sh failed (output above)"
    exit 1
fi
