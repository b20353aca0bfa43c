"""The Method section of the dataplane report: what each number counts, from which event to which."""

from __future__ import annotations

from bench.dataplane import testbed


def method_text(
    switch_cpu: int, traffic_cpu: int, seconds: float, repeat: int, writes: int, rig_packets: int, rig_repeat: int,
    hosts: int, buckets: int, no_loss: float, ipv6_size: int, generator: str,
) -> str:
    return f"""\
**Goals**: `switch_pps_64` >= 1,000,000 frames per second on one core (BMv2's own docs put
BMv2 near 80 kpps), and the same for the IPv6 row, `switch_pps_ipv6_{ipv6_size}`; `move_rtt_ms` <= 5 ms.
Frame sizes are Ethernet sizes including the 4-byte FCS (60 and 1396 bytes on the veth;
{ipv6_size} B, {ipv6_size - 4} on the veth, is the smallest frame an IPv6/UDP datagram fits in).

**What is measured: the shipped switch, as deployed.** `targets/ebpf/bin/supergw-switch` with
its default flags (only device id, P4Runtime address, CPU port, pin directory and `-i` ports
given) in namespace `{testbed.SWITCH_NS}`, a host on port {testbed.HOST_PORT} and gateways on ports
{', '.join(map(str, testbed.GATEWAY_PORTS))} (interfaces {', '.join(testbed.SWITCH_IFACES.values())}), configured only over P4Runtime with
the state the controller writes (`bench/dataplane/lan_state.py`, built with the controller's
own entity builders, initial bucket assignment and `HostTable`): the pipeline, `settings`,
`port_roles`, the host flood group, the learn digest, all {buckets} buckets spread over the two
gateways (smooth weighted round robin), and {hosts} learned hosts (`learned_sources` with the
default ageing as idle timeout, `mac_table`, `host_ips`). The LAN is dual stack: `nd_settings`
holds the gateway's link-local and global IPv6 addresses, the IPv6 learn digest is configured,
and every host's IPv6 address (its IPv4 address's twin in fd00:98::/64) is learned as the
controller learns it (`learned_ip6s`, `host_ip6s`), so an IPv6 frame takes the switch's IPv6
fast path (its `nd_settings` and `learned_ip6s` lookups) and raises no digest. The gateways'
MACs are not vmacs, so every frame is rewritten.

**Traffic** (`sgw-traffic`, targets/ebpf/cmd/sgw-traffic) on core {traffic_cpu}, out of the
host's (or a gateway's) veth into the switch's port, in the fastest generator mode this kernel
allows (asked with `sgw-traffic -modes` at the start; this run: **{generator}**): either an XDP
program run with `BPF_PROG_RUN` + `BPF_F_TEST_XDP_LIVE_FRAMES` (the kernel builds each frame
from a recycled page and transmits it; the program writes the plan frame's headers), or an
AF_PACKET TX ring with the qdisc bypassed (the generator writes whole plan frames into a shared
ring, one `send()` per batch; the kernel allocates an skb and copies each frame, on the
traffic core; UDP frames go with checksum offload state, CHECKSUM_PARTIAL, as a host's stack
hands them to a NIC or veth, so the switch port's GRO does not verify in software a checksum
no NIC- or stack-fed port verifies: IPv6's is mandatory, and frames without that state cost
IPv6 a software checksum per frame that the IPv4 frames, whose UDP checksum is zero, never
pay; the generator's sending ends have TSO off, else veth would hand its frames to the
switch port's backlog on the traffic core instead of its NAPI thread). The switch's side differs between them: a live frame reaches the switch port
as an XDP frame and the switch's core builds its skb; a TX-ring frame arrives as an skb built
on the traffic core. So `switch_pps_64_by_*` runs host -> gateway 64 B with every mode the
kernel allows, side by side (a refused mode is null with the kernel's answer). Frame i is
plan frame i mod {hosts}: host -> gateway, from each of the {hosts} hosts' MACs to its own vmac (all
{buckets} buckets, both gateways); gateway -> host, from gateway 1's MAC to each host's MAC;
**the IPv6 row**, host -> gateway again but IPv6/UDP from each host's IPv6 address (the
live-frame generator writes each frame's 62 bytes of Ethernet, IPv6 and UDP headers instead of 42), in
the same run, on the same switch, state, cores and sinks, counted and charged as the IPv4 rows.
Unpaced, it offers as much as it can (the `offered_pps` column; the rows give the share of
the core the switch's threads got): with live frames several times what the switch's core
can take, so the switch never waits and what does not fit is dropped at the switch port's
receive ring (the `delivered_share` column), as a NIC drops when its ring is full; the TX
ring waits for the receiving ring instead of dropping.

**Counted at the receiving end**: a tc program on each receiving veth (the gateways' and the
host's eth0) counts every frame and checks the rewrite: host -> gateway frames must arrive
with dst = that gateway's own MAC, gateway -> host frames with src = a vmac. A frame without
the rewrite, or a gateway whose share of the frames differs by more than 3 points from what
the bucket assignment gives it, fails the benchmark. "Delivered" = frames those sinks counted
from the generator's first frame until 200 ms after its last.

**CPU, attributed honestly.** Two cores, two roles. Every veth receives in a NAPI context run
by its own kernel thread (threaded NAPI; re-polled on a 50 us timer while frames come, like a
NIC's interrupt coalescing). The switch's ports' threads and the switch process are pinned to
core {switch_cpu}: a frame is received, run through the tc program, redirected and transmitted
into the next veth by the switch port's thread, in its context, and nothing else of the path
runs on that core (TSO/GSO are off on the switch's ports, so a transmitted frame goes to the
receiving end's ring instead of being received on the switch's core). The generator and the
sinks' threads (real-time priority, so counting never loses to generating) run on core
{traffic_cpu}. **`switch_pps_*` = delivered frames / (run time of the switch's port threads,
from the scheduler's nanosecond count in `/proc/<pid>/schedstat`, + CPU time of the
supergw-switch process, `/proc/<pid>/stat`), both read just before sgw-traffic starts and
after it exits (it attaches its sinks before its first frame and reads them 200 ms after its
last).** The process's share is its control plane (P4Runtime, the idle-timeout scan of the
learned hosts every 100 ms), which runs whether frames flow or not. `switch_wall_pps_64` =
delivered frames / seconds of sending: with the switch's core to itself that is its capacity
on one core; the rows give the share of the core its threads got (`switch_thread_share`) and
the core's busy seconds from `/proc/stat` (wall minus idle and iowait: other tasks on that core
included, so frames per busy second of the core, `pps_per_core_second`, is a lower bound).
Figures are the median of {repeat} run(s) of {seconds:g} s.

**IPv6 against IPv4**: `ipv6_over_ipv4_64` = `switch_pps_ipv6_{ipv6_size}` / `switch_pps_64`, goal >= 0.9.

**Where the time goes**: `tc_program_ns_64` (and `tc_program_ns_ipv6_{ipv6_size}` for the IPv6 row's frames) comes from one more host -> gateway run with
the kernel's eBPF run-time statistics on (`BPF_ENABLE_STATS`, held by sgw-traffic for that run
only; it adds two clock reads per program run): the kernel's run time / run count of the
switch's tc program on the host port, i.e. the program and the helpers it calls (map lookups, redirect),
against the switch's ns per frame in the same run; the difference is the kernel's veth receive
(skb build, GRO, netif receive) and transmit work.

**`rig_pps_64`** (a rig, not the shipped process, kept for comparison with earlier reports):
`sgw-dpbench -mode live`, {rig_repeat} run(s) of {rig_packets:,} frames on core {switch_cpu}, median:
its own namespace and a switch made of the same eBPF programs configured directly (no
P4Runtime, no switch process), one repeated frame whose bucket's gateway MAC is its vmac (so
the rewrite writes nothing), generator, switch and sink on one core (softirq, no threaded
NAPI), frames per wall-clock second counted by the switch's own port tx counter. The
`progrun` row times the tc program alone (`BPF_PROG_RUN`, no I/O, one cached frame).

**Switch restarts under traffic** (`restart.py`): 16 hosts send 1,000 frames/s each host ->
gateway (64 B, paced, checked as above) for 6 s; 2 s in the switch process is replaced:
`switch_restart_lost` SIGTERM and a new supergw-switch started at once (systemctl restart, a
package upgrade), `switch_crash_lost` SIGKILL and a new one; each = frames sent - delivered over
the whole run, with no controller (the new switch has only the data plane it adopted and its
journal). `switch_restart_control_lost` is the negative control: the same restart of a switch
started with `--teardown-on-exit`, whose data plane goes with its process, as every switch's
did before restarts were lossless, configured again over P4Runtime as soon as it answers (the
controller's reconcile); it must lose, or the benchmark fails.

**`move_rtt_ms`** - {writes} single-update P4Runtime `Write` RPCs (`bench/dataplane/control.py`),
each a MODIFY of one bucket entry, alternating between the two gateways, timed from send to
reply by a client in the switch namespace after 10 warm-up writes; the median.

**`bmv2_pps_*`** - in the same run, when `simple_switch_grpc` and `p4c` exist: p4c compiles
`p4src/v1model/supergw.p4` (BMv2 JSON + P4Info), and BMv2 replaces supergw-switch on the same
veths and core {switch_cpu} (device {testbed.BMV2_DEVICE_ID}) with the same P4Runtime state,
generator and sinks, host -> gateway. The binary is the build without logging macros when one
is installed (`/opt/p4tools/perf/bin`), else the one on PATH (the rows record which, and
whether it has packet logging compiled in); it is never started with
`--log-file`/`--log-console`, since a logging BMv2 measures its logger. An overloaded BMv2
spends its time dropping, so after one unpaced run the generator is paced (`sgw-traffic
-rate`: a token bucket, in the XDP program or in the TX-ring sender, spaces the frames evenly) and `bmv2_pps_*` is the
highest delivered rate among paced runs of {seconds:g} s that lose under {1 - no_loss:.0%} (up by
1.3x from the unpaced rate while runs pass, then bisecting; a losing rate is run twice).
`switch_over_bmv2_64` = `switch_pps_64` / BMv2's delivered frames per CPU-second (its process
and its ports' threads) in its no-loss run. Without BMv2 or p4c: null with the reason."""
