#!/usr/bin/env bash
# Run the supergw PTF suite against one target inside a private network namespace.
#
#   ptf-tests/run.sh --target ebpf|bmv2 --xunit DIR [--timeout SEC] [--gdb] [-- PTF_TEST_SPEC...]
#
# Creates the namespace and veth pairs from ptf-tests/ports.json, starts the target there
# (pid tracked, logs in DIR-logs/), waits for its gRPC port, runs ptf inside the
# namespace and always tears everything down (EXIT/INT/TERM). Exit code = ptf's; non-zero
# when no test ran. --target bmv2 without simple_switch_grpc (or without p4c to build
# build/p4/supergw.json) is reported as skipped (exit 0, nothing claimed as passed).
# A target that dies during the run is reported once, with the tail of its log, and
# restarted (at most MAX_RESTARTS times): the next test pushes the pipeline again
# instead of every later test failing with "connection refused". --gdb runs the target
# under `gdb -batch`, so a crash leaves every thread's backtrace in its log.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
PY="$REPO/.venv/bin/python"
PTF="$REPO/.venv/bin/ptf"
P4INFO="$REPO/p4src/v1model/supergw.p4info.txtpb"
BMV2_JSON="$REPO/build/p4/supergw.json"
EBPF_BIN="$REPO/targets/ebpf/bin/supergw-switch"
PORTS_FILE="$HERE/ports.json"
DEVICE_ID=1
GRPC_ADDR="127.0.0.1:9559"
MAX_RESTARTS=3

target="" xunit="" ready_timeout=30 use_gdb=""
spec=()
usage() { sed -n '4,4p' "$0" | sed 's/^#  *//' >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --target) target="${2:-}"; shift 2 ;;
    --xunit) xunit="${2:-}"; shift 2 ;;
    --timeout) ready_timeout="${2:-}"; shift 2 ;;
    --gdb) use_gdb=1; shift ;;
    --) shift; spec=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$target" == ebpf || "$target" == bmv2 ]] || { echo "run.sh: --target must be ebpf or bmv2" >&2; usage; }
[[ -n "$xunit" ]] || { echo "run.sh: --xunit DIR is required" >&2; usage; }
[[ "$ready_timeout" =~ ^[0-9]+$ ]] || { echo "run.sh: --timeout must be whole seconds" >&2; exit 2; }
[[ $EUID -eq 0 ]] || { echo "run.sh: needs root (network namespaces, veths, raw sockets)" >&2; exit 2; }
mkdir -p "$xunit"
xunit="$(cd "$xunit" && pwd)"
# ptf empties its xunit directory: logs go beside it.
logdir="${xunit%/}-logs"
mkdir -p "$logdir"

log() { printf '== ptf[%s]: %s\n' "$target" "$*"; }

# A skip is written as a JUnit skipped case so the summary shows it, never as a pass.
skip() {
  log "SKIPPED: $1"
  rm -f "$xunit"/*.xml
  local reason="${1//&/&amp;}"; reason="${reason//</&lt;}"; reason="${reason//\"/&quot;}"
  cat >"$xunit/TEST-ptf-$target.xml" <<EOF
<?xml version="1.0" encoding="utf-8"?>
<testsuite name="ptf-$target" tests="1" failures="0" errors="0" skipped="1">
  <testcase classname="ptf.$target" name="suite"><skipped message="$reason"/></testcase>
</testsuite>
EOF
  exit 0
}

for tool in "$PY" "$PTF"; do
  [[ -x "$tool" ]] || { echo "run.sh: $tool missing: run 'make deps'" >&2; exit 2; }
done
[[ -f "$P4INFO" ]] || { echo "run.sh: $P4INFO missing (owned by p4src/)" >&2; exit 2; }

device_config=""
case "$target" in
  ebpf)
    [[ -x "$EBPF_BIN" ]] || { echo "run.sh: $EBPF_BIN missing: run 'make switch'" >&2; exit 2; }
    ;;
  bmv2)
    command -v simple_switch_grpc >/dev/null || skip "simple_switch_grpc (BMv2) is not installed: see p4src/README.md, 'Get p4c and BMv2'"
    if [[ ! -f "$BMV2_JSON" ]]; then
      command -v p4c >/dev/null || skip "$BMV2_JSON missing and p4c is not installed to build it"
      echo "run.sh: $BMV2_JSON missing: run 'make p4' (or 'make ptf TARGET=bmv2', which runs it)" >&2
      exit 2
    fi
    device_config="$BMV2_JSON"
    ;;
esac

# Port map: one source (ports.json), read through the same loader the tests use.
mapfile -t portmap < <(cd "$HERE/lib" && "$PY" -m supergw_ptf.portmap "$PORTS_FILE")
NS="" CPU_PORT="" sw_args=() ptf_args=() pairs=()
for line in "${portmap[@]}"; do
  read -r kind a b c <<<"$line"
  case "$kind" in
    namespace) NS="$a" ;;
    cpu_port) CPU_PORT="$a" ;;
    port) sw_args+=(-i "$a@$b"); ptf_args+=(--interface "$a@$c"); pairs+=("$b $c") ;;
  esac
done
[[ -n "$NS" && -n "$CPU_PORT" && ${#pairs[@]} -gt 0 ]] || { echo "run.sh: bad port map $PORTS_FILE" >&2; exit 2; }

supervisor_pid="" ptf_wrapper="" ptf_pidfile="" ns_created=""
# Every process still inside our namespace (ptf, the target, their wrappers): the fallback
# when a Ctrl-C comes before a pid file was written. Selected by namespace, never by name.
kill_ns_procs() {
  [[ -n "$ns_created" ]] || return 0
  local pids
  pids="$(ip netns pids "$NS" 2>/dev/null | tr '\n' ' ')"
  [[ -n "${pids// }" ]] || return 0
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 30); do
    pids="$(ip netns pids "$NS" 2>/dev/null | tr '\n' ' ')"
    [[ -n "${pids// }" ]] || return 0
    sleep 0.1
  done
  kill -KILL $pids 2>/dev/null || true
}
cleanup() {
  local rc=$?
  # A second Ctrl-C must not cut the cleanup short.
  trap - EXIT
  trap '' INT TERM
  if [[ -n "$ptf_wrapper" ]]; then
    local ptf_pid
    ptf_pid="$(cat "$ptf_pidfile" 2>/dev/null || true)"
    if [[ -n "$ptf_pid" ]] && kill -0 "$ptf_pid" 2>/dev/null; then
      log "interrupted: stopping ptf (pid $ptf_pid)"
      kill -TERM "$ptf_pid" 2>/dev/null || true
      for _ in $(seq 30); do kill -0 "$ptf_pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$ptf_pid" 2>/dev/null || true
    fi
    [[ -n "$ptf_pid" ]] || kill_ns_procs
    wait "$ptf_wrapper" 2>/dev/null || true
  fi
  # The supervisor must not restart the target we are about to stop.
  [[ -n "$supervisor_pid" ]] && touch "$stopfile"
  local target_pid=""
  [[ -n "$supervisor_pid" ]] && target_pid="$(cat "$pidfile" 2>/dev/null || true)"
  if [[ -n "$target_pid" ]] && kill -0 "$target_pid" 2>/dev/null; then
    log "stopping target (pid $target_pid)"
    kill -TERM "$target_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$target_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$target_pid" 2>/dev/null; then
      log "target did not stop on SIGTERM within 5s, sending SIGKILL"
      kill -KILL "$target_pid" 2>/dev/null || true
    fi
  fi
  kill_ns_procs
  [[ -n "$supervisor_pid" ]] && wait "$supervisor_pid" 2>/dev/null || true
  [[ -n "$ns_created" ]] && ip netns del "$NS" 2>/dev/null || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ip netns list | grep -qE "^$NS( |\$)"; then
  echo "run.sh: namespace $NS already exists: another PTF run is using it, or one was killed" \
    "with SIGKILL. If none is running: ip netns del $NS" >&2
  exit 1
fi
log "creating namespace $NS with ${#pairs[@]} veth pairs"
ns_created=1  # before the add: a Ctrl-C right after it must still delete the namespace
ip netns add "$NS"
# `ip netns exec` gives each command a private mount namespace with a fresh /sys: a
# bpffs the eBPF target mounts and pins into stays private to it and vanishes with it.
nsx() { ip netns exec "$NS" "$@"; }
# No IPv6 anywhere in the namespace: router/neighbour solicitations would pollute captures.
nsx sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
nsx ip link set lo up
for pair in "${pairs[@]}"; do
  read -r sw pt <<<"$pair"
  nsx ip link add "$sw" type veth peer name "$pt"
  for dev in "$sw" "$pt"; do
    nsx sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
    nsx ip link set "$dev" mtu 1500 up
    # Offloads would hand the switch super-frames and unfinished checksums.
    nsx ethtool -K "$dev" tx off rx off tso off gso off gro off lro off >/dev/null 2>&1 || true
  done
done

target_log="$logdir/target-$target.log"
case "$target" in
  ebpf)
    cmd=("$EBPF_BIN" --device-id "$DEVICE_ID" --grpc-server-addr "$GRPC_ADDR" --cpu-port "$CPU_PORT"
      --pin-dir "/sys/fs/bpf/$NS" "${sw_args[@]}")
    ;;
  bmv2)
    cmd=(simple_switch_grpc --device-id "$DEVICE_ID" "${sw_args[@]}" --log-file "$logdir/bmv2" --log-flush --no-p4
      -- --grpc-server-addr "$GRPC_ADDR" --cpu-port "$CPU_PORT")
    ;;
esac
host="${GRPC_ADDR%:*}" port="${GRPC_ADDR##*:}"
grpc_up() { nsx "$PY" -c "import socket; socket.create_connection(('$host', $port), 0.5)" 2>/dev/null; }
# Where the target writes what it was doing when it died.
target_logs=("$target_log")
[[ "$target" == bmv2 ]] && target_logs+=("$logdir/bmv2.txt")

# The supervisor runs the target and, once the suite has started (readyfile), restarts
# it whenever it dies. `ip netns exec` may fork: the target writes its own pid (sh execs
# it) so that the pid we stop is the switch itself, not the ip wrapper.
pidfile="$logdir/target.pid" readyfile="$logdir/target.ready" stopfile="$logdir/target.stop"
deathsfile="$logdir/target.deaths"
rm -f "$pidfile" "$readyfile" "$stopfile" "$deathsfile"
: >"$target_log"
supervise() {
  local deaths=0 rc sig
  while :; do
    nsx sh -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "${cmd[@]}" >>"$target_log" 2>&1 &
    rc=0
    wait $! || rc=$?
    [[ -e "$stopfile" || ! -e "$readyfile" ]] && exit 0
    deaths=$((deaths + 1))
    echo "$deaths" >"$deathsfile"
    sig=""
    ((rc > 128)) && sig=" (signal $(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128))))"
    {
      log "TARGET DIED during the run: exit status $rc$sig, pid $(cat "$pidfile" 2>/dev/null)."
      log "The test running at that moment fails; last lines of its logs:"
      for f in "${target_logs[@]}"; do
        echo "    --- $f"
        tail -n 15 "$f" 2>/dev/null | sed 's/^/    /'
      done
      echo "    ---"
    } >&2
    if ((deaths > MAX_RESTARTS)); then
      log "the target died $deaths times: not restarting it again; the remaining tests will fail" >&2
      exit 1
    fi
    log "restarting the target ($deaths of at most $MAX_RESTARTS restarts); later tests push the pipeline again" >&2
    rm -f "$pidfile"
    (
      for ((i = 0; i < ready_timeout * 2; i++)); do
        sleep 0.5
        [[ -s "$pidfile" ]] && grpc_up && { log "target is back (pid $(cat "$pidfile"))" >&2; exit 0; }
      done
      log "the restarted target has no gRPC listener after ${ready_timeout}s" >&2
    ) &
  done
}

if [[ -n "$use_gdb" ]]; then
  command -v gdb >/dev/null || { echo "run.sh: --gdb needs gdb (apt-get install gdb)" >&2; exit 2; }
  cmd=(gdb -q -batch -ex 'set pagination off' -ex 'handle SIGPIPE nostop noprint pass' -ex run -ex 'thread apply all bt' --args "${cmd[@]}")
fi
log "starting: ${cmd[*]}"
supervise &
supervisor_pid=$!
for _ in $(seq 50); do [[ -s "$pidfile" ]] && break; sleep 0.1; done
[[ -s "$pidfile" ]] || { echo "run.sh: the target did not start (no pid in $pidfile); see $target_log" >&2; exit 1; }
log "target pid $(cat "$pidfile")"

log "waiting up to ${ready_timeout}s for gRPC on $GRPC_ADDR in $NS"
for ((i = 0; ; i++)); do
  if ! kill -0 "$supervisor_pid" 2>/dev/null; then
    echo "run.sh: the target exited during start-up; last lines of $target_log:" >&2
    tail -n 20 "$target_log" >&2
    exit 1
  fi
  if grpc_up; then
    log "gRPC is up after ${i}s"
    break
  fi
  if ((i >= ready_timeout)); then
    echo "run.sh: no gRPC listener on $GRPC_ADDR after ${ready_timeout}s. Check $target_log," \
      "that '${cmd[0]}' accepts --grpc-server-addr, and that nothing else uses port $port in $NS." >&2
    tail -n 20 "$target_log" >&2
    exit 1
  fi
  ((i % 5 == 0)) && log "still waiting (${i}s)..."
  sleep 1
done
touch "$readyfile"

params="grpcaddr='$GRPC_ADDR';p4info='$P4INFO';device_id=$DEVICE_ID;cpu_port=$CPU_PORT"
params+=";target='$target';ports_file='$PORTS_FILE'"
[[ -n "$device_config" ]] && params+=";device_config='$device_config'"

log "running ptf (logs: $logdir)"
# ptf runs in the background and we `wait` for it: bash runs the INT/TERM traps only
# between commands, and a foreground ptf would delay cleanup until the suite ended.
ptf_pidfile="$logdir/ptf.pid"
rm -f "$ptf_pidfile"
nsx env PYTHONPATH="$HERE/lib" sh -c 'echo $$ >"$0"; exec "$@"' "$ptf_pidfile" "$PTF" \
  --test-dir "$HERE/tests" --pypath "$HERE/lib" \
  "${ptf_args[@]}" --test-params "$params" \
  --default-timeout 2 --default-negative-timeout 0.3 --test-case-timeout 300 \
  --log-file "$logdir/ptf.log" --xunit --xunit-dir "$xunit" "${spec[@]}" &
ptf_wrapper=$!
rc=0
wait "$ptf_wrapper" || rc=$?
ptf_wrapper=""

ran="$("$PY" - "$xunit" <<'EOF'
import sys, xml.etree.ElementTree as ET
from pathlib import Path
ran, bad, skipped = 0, [], []
for f in sorted(Path(sys.argv[1]).glob("*.xml")):
    for case in ET.parse(f).getroot().iter("testcase"):
        name = case.get("classname", "")
        if case.find("skipped") is not None:
            skipped.append(name)
            continue
        ran += 1
        if case.find("failure") is not None or case.find("error") is not None:
            bad.append(name)
for name in bad:
    print(f"   FAILED  {name}", file=sys.stderr)
for name in skipped:
    print(f"   SKIPPED {name}", file=sys.stderr)
print(ran)
EOF
)"
log "ptf exit code $rc, $ran test(s) ran"
if [[ -s "$deathsfile" ]]; then
  log "WARNING: the target died $(cat "$deathsfile") time(s) during the run and was restarted; see 'TARGET DIED' above and $logdir"
fi
if [[ "$ran" -eq 0 && $rc -eq 0 ]]; then
  echo "run.sh: zero tests ran: treating as failure" >&2
  rc=1
fi
exit "$rc"
