// Command supergw-hostsim emulates many hosts and a traffic generator on one interface
// (topologies/hostsim/README.md).
package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"supergw/topologies/hostsim/internal/sim"
)

// presets are the clustering paper's host ranges (§4): 224 hosts per side.
var presets = map[string]struct{ gw, ip, mac string }{
	"paper-a": {"192.168.203.1", "192.168.203.24", "00:00:03:00:00:18"},
	"paper-b": {"192.168.204.1", "192.168.204.24", "00:00:04:00:00:18"},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "supergw-hostsim: %v\n", err)
		os.Exit(2)
	}
}

func run() error {
	iface := flag.String("iface", "", "interface to emulate the hosts on (required)")
	socket := flag.String("socket", "", "control socket path (required)")
	preset := flag.String("preset", "", "paper-a or paper-b: the paper's gateway IP, first IP and MAC, 224 hosts")
	gw := flag.String("gateway-ip", "", "IP_G, the gateway IP every host ARPs for")
	firstIP := flag.String("first-ip", "", "IPv4 of host 0 (host k has first-ip + k)")
	firstMAC := flag.String("first-mac", "", "MAC of host 0 (host k has first-mac + k * mac-step)")
	macStep := flag.Uint64("mac-step", 1, "distance between two hosts' MACs (256: the paper's §4.3 hosts ..:18:00, ..:19:00, ...)")
	count := flag.Int("count", 0, "number of hosts")
	prefixLen := flag.Int("prefix-len", 24, "the LAN's prefix length")
	gw6 := flag.String("gateway-ip6", "", "dual stack: the gateway's IPv6 address the hosts resolve with Neighbor Discovery (its link-local LL_G)")
	firstIP6 := flag.String("first-ip6", "", "dual stack: global IPv6 address of host 0 in a /64 (host k has first-ip6 + k)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", flag.Args())
	}
	if *preset != "" {
		p, ok := presets[*preset]
		if !ok {
			return fmt.Errorf("--preset %q: known presets are paper-a and paper-b", *preset)
		}
		*gw, *firstIP, *firstMAC = or(*gw, p.gw), or(*firstIP, p.ip), or(*firstMAC, p.mac)
		if *count == 0 {
			*count = 224
		}
	}
	if *iface == "" || *socket == "" || *gw == "" || *firstIP == "" || *firstMAC == "" || *count == 0 {
		return fmt.Errorf("--iface, --socket, --gateway-ip, --first-ip, --first-mac and --count are required (or --preset)")
	}
	if *macStep == 0 {
		return fmt.Errorf("--mac-step must be at least 1")
	}
	cfg := sim.Config{Count: *count, PrefixLen: *prefixLen, MACStep: *macStep}
	var err error
	if cfg.GatewayIP, err = netip.ParseAddr(*gw); err != nil {
		return fmt.Errorf("--gateway-ip: %w", err)
	}
	if cfg.FirstIP, err = netip.ParseAddr(*firstIP); err != nil {
		return fmt.Errorf("--first-ip: %w", err)
	}
	if cfg.FirstMAC, err = net.ParseMAC(*firstMAC); err != nil {
		return fmt.Errorf("--first-mac: %w", err)
	}
	if (*gw6 == "") != (*firstIP6 == "") {
		return fmt.Errorf("--gateway-ip6 and --first-ip6 go together (dual stack) or not at all (IPv4 only)")
	}
	if *gw6 != "" {
		if cfg.GatewayIP6, err = netip.ParseAddr(*gw6); err != nil {
			return fmt.Errorf("--gateway-ip6: %w", err)
		}
		if cfg.FirstIP6, err = netip.ParseAddr(*firstIP6); err != nil {
			return fmt.Errorf("--first-ip6: %w", err)
		}
	}
	link, err := sim.OpenPacketLink(*iface, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer link.Close()
	s, err := sim.New(cfg, link)
	if err != nil {
		return err
	}
	srv, err := sim.Listen(s, *socket)
	if err != nil {
		return err
	}
	srv.Iface = *iface
	defer os.Remove(*socket)
	defer srv.Close()
	stop := make(chan struct{})
	rxErr := make(chan error, 1)
	go func() { rxErr <- s.Receive(stop, sim.Batch) }()
	go srv.Serve()
	if _, err := s.Resolve(true); err != nil {
		return err
	}
	go s.ResolveLoop(stop)
	dual := ""
	if s.IPv6() {
		dual = fmt.Sprintf(" and %s.., gateway %s", cfg.FirstIP6, cfg.GatewayIP6)
	}
	fmt.Printf("hostsim: %d hosts %s..%s on %s, IP_G %s; ready to take commands on %s\n", cfg.Count, cfg.FirstIP, dual, *iface,
		cfg.GatewayIP, *socket)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case <-srv.Quit:
		time.Sleep(50 * time.Millisecond) // let the quit answer go out
	case err := <-rxErr:
		return fmt.Errorf("receiving on %s: %w", *iface, err)
	}
	s.Stop()
	close(stop)
	return nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
