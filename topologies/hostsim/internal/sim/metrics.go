package sim

import (
	"fmt"
	"strings"
)

// Prometheus renders the counters in the Prometheus text format (the `metrics` command):
// per host frames and bytes each way, and the totals of the test traffic.
func (s *Sim) Prometheus() string {
	st := s.Snapshot(true, false)
	var b strings.Builder
	family := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	perHost := []struct {
		name, help string
		get        func(h HostStats) uint64
	}{
		{"supergw_hostsim_host_tx_packets_total", "frames sent by the simulated host", func(h HostStats) uint64 { return h.TxPackets }},
		{"supergw_hostsim_host_tx_bytes_total", "bytes sent by the simulated host (without FCS)", func(h HostStats) uint64 { return h.TxBytes }},
		{"supergw_hostsim_host_rx_packets_total", "frames received by the simulated host", func(h HostStats) uint64 { return h.RxPackets }},
		{"supergw_hostsim_host_rx_bytes_total", "bytes received by the simulated host (without FCS)", func(h HostStats) uint64 { return h.RxBytes }},
	}
	for _, m := range perHost {
		family(m.name, "counter", m.help)
		for _, h := range st.Hosts {
			fmt.Fprintf(&b, "%s{host=%q,mac=%q} %d\n", m.name, h.IP, h.MAC, m.get(h))
		}
	}
	type resolvedGauge struct {
		name, help string
		mac        func(h HostStats) *string
	}
	resolved := []resolvedGauge{{"supergw_hostsim_host_resolved", "1 when the host resolved IP_G",
		func(h HostStats) *string { return h.GatewayMAC }}}
	if s.IPv6() {
		resolved = append(resolved, resolvedGauge{"supergw_hostsim_host_resolved6",
			"1 when the host resolved the gateway's IPv6 address", func(h HostStats) *string { return h.GatewayMAC6 }})
	}
	for _, g := range resolved {
		family(g.name, "gauge", g.help)
		for _, h := range st.Hosts {
			v := 0
			if g.mac(h) != nil {
				v = 1
			}
			fmt.Fprintf(&b, "%s{host=%q,mac=%q} %d\n", g.name, h.IP, h.MAC, v)
		}
	}
	t := st.Totals
	for _, c := range []struct {
		name, help string
		v          uint64
	}{
		{"supergw_hostsim_test_tx_packets_total", "generator frames sent", t.TestTx},
		{"supergw_hostsim_test_rx_packets_total", "generator frames received", t.TestRx},
		{"supergw_hostsim_test_lost_total", "sequence holes in received flows", t.Lost},
		{"supergw_hostsim_malformed_total", "frames that did not parse", t.Malformed},
		{"supergw_hostsim_ignored_total", "frames for no simulated host", t.Ignored},
	} {
		family(c.name, "counter", c.help)
		fmt.Fprintf(&b, "%s %d\n", c.name, c.v)
	}
	family("supergw_hostsim_max_gap_seconds", "gauge", "longest gap between two frames of a received flow")
	fmt.Fprintf(&b, "supergw_hostsim_max_gap_seconds %g\n", t.MaxGapMs/1e3)
	return b.String()
}
