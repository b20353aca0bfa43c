#!/usr/bin/env bash
# Full Tofino compile of p4src/tna/supergw.p4 with Intel's bf-p4c (the Tofino SDE's p4c),
# into build/p4/tna/<target>/: tofino.bin / tofino2.bin, context.json, bfrt.json and
# the P4Info the controller and Stratum use. Needs the SDE; skipped otherwise.
#
#   p4src/tna/compile-tofino.sh [tofino|tofino2] [-DSUPERGW_TNA_CPU_PORT=192 ...]
#
# bf-p4c is looked up in PATH, then in $SDE_INSTALL/bin (set by the SDE's set_sde.bash).
# The command it runs (also in docs/deploy-tofino.md):
#   bf-p4c --target tofino --arch tna --std p4-16 -g \
#          --p4runtime-files build/p4/tna/tofino/p4info.txtpb --p4runtime-force-std-externs \
#          -o build/p4/tna/tofino p4src/tna/supergw.p4
# --p4runtime-force-std-externs makes counters, direct counters and the digest standard
# P4Info objects and strips the "pipe." prefix (Stratum requires it; so does the controller).
# Exit status: 0 compiled, 1 failed, 3 skipped (bf-p4c is not installed).
set -euo pipefail
cd "$(dirname "$0")/../.."

target=${1:-tofino}
shift || true
case "$target" in
    tofino) arch=tna ;;
    tofino2) arch=t2na ;;
    *) echo "compile-tofino: unknown target '$target' (tofino or tofino2)" >&2; exit 1 ;;
esac

bfp4c=$(command -v bf-p4c || true)
if [ -z "$bfp4c" ] && [ -n "${SDE_INSTALL:-}" ] && [ -x "$SDE_INSTALL/bin/bf-p4c" ]; then
    bfp4c="$SDE_INSTALL/bin/bf-p4c"
fi
if [ -z "$bfp4c" ]; then
    echo "p4 tofino: SKIPPED — bf-p4c (Intel Tofino SDE) is not installed; on an SDE" \
         "machine: source set_sde.bash, then p4src/tna/compile-tofino.sh $target"
    exit 3
fi

out=build/p4/tna/$target
mkdir -p "$out"
echo "p4 tofino: $("$bfp4c" --version 2>&1 | head -n1)"
if ! "$bfp4c" --target "$target" --arch "$arch" --std p4-16 -g "$@" \
        --p4runtime-files "$out/p4info.txtpb" --p4runtime-force-std-externs \
        -o "$out" p4src/tna/supergw.p4; then
    echo "p4 tofino: FAILED — bf-p4c rejected p4src/tna/supergw.p4 for $target" \
         "(see $out/*.log and docs/deploy-tofino.md, 'Resources')" >&2
    exit 1
fi
echo "p4 tofino: compiled $out (P4Info: $out/p4info.txtpb)"
