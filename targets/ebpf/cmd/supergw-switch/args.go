package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"supergw/targets/ebpf/internal/dataplane"
	"supergw/targets/ebpf/internal/grpctls"
)

var errHelp = flag.ErrHelp

type options struct {
	deviceID  uint64
	grpcAddr  string
	cpuPort   uint16
	ports     map[uint16]string
	logLevel  string
	logFile   string
	pinRoot   string
	stateRoot string
	// teardown: remove the data plane a previous instance left for this device and exit.
	teardown            bool
	teardownOnExit      bool
	replaceIncompatible bool
	ignoredJSON         []string
	tls                 grpctls.Options
}

// ifaceFlag collects repeated -i N@iface options.
type ifaceFlag struct{ ports map[uint16]string }

func (f *ifaceFlag) String() string {
	if f == nil || f.ports == nil {
		return ""
	}
	var parts []string
	for p, name := range f.ports {
		parts = append(parts, fmt.Sprintf("%d@%s", p, name))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (f *ifaceFlag) Set(v string) error {
	num, name, ok := strings.Cut(v, "@")
	if !ok || num == "" || name == "" {
		return fmt.Errorf("want PORT@IFACE, got %q", v)
	}
	p, err := strconv.ParseUint(num, 10, 16)
	if err != nil {
		return fmt.Errorf("port number in %q: %w", v, err)
	}
	if _, dup := f.ports[uint16(p)]; dup {
		return fmt.Errorf("port %d given twice", p)
	}
	for _, other := range f.ports {
		if other == name {
			return fmt.Errorf("interface %q given twice", name)
		}
	}
	f.ports[uint16(p)] = name
	return nil
}

// parseArgs accepts simple_switch_grpc's command line: switch options, an
// optional BMv2 JSON path (ignored) or --no-p4, then "--" and the target
// options (--grpc-server-addr, --cpu-port ...). Every option is accepted on
// either side of "--".
func parseArgs(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	ifaces := &ifaceFlag{ports: map[uint16]string{}}
	fs := flag.NewFlagSet("supergw-switch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Uint64Var(&o.deviceID, "device-id", 0, "P4Runtime device id")
	fs.StringVar(&o.grpcAddr, "grpc-server-addr", "0.0.0.0:9559", "P4Runtime gRPC listen address")
	cpu := fs.Uint("cpu-port", 255, "P4 port number of the CPU port (simple_switch_grpc has no default; ours is 255)")
	fs.Var(ifaces, "i", "attach a front port: PORT@IFACE (repeatable)")
	fs.Var(ifaces, "interface", "same as -i")
	fs.StringVar(&o.logLevel, "log-level", "warn", "trace, debug, info, warn, error or off")
	fs.StringVar(&o.logFile, "log-file", "", "write logs to this file instead of stderr")
	fs.StringVar(&o.pinRoot, "pin-dir", dataplane.DefaultPinRoot, "bpffs directory; maps and links are pinned under <pin-dir>/<device-id>")
	fs.StringVar(&o.stateRoot, "state-dir", DefaultStateRoot, "the P4Runtime state journal goes under <state-dir>/<device-id> (next to the pins' lifetime: /run)")
	fs.BoolVar(&o.teardown, "teardown", false, "remove the running data plane a previous instance of this device left (programs off the ports, maps, journal) and exit")
	fs.BoolVar(&o.teardownOnExit, "teardown-on-exit", false, "on SIGINT/SIGTERM take the data plane down instead of leaving it forwarding for the next instance")
	fs.BoolVar(&o.replaceIncompatible, "replace-incompatible", false, "replace a running data plane whose maps do not fit this build's pipeline (their counters restart; see README) instead of refusing to start")
	fs.BoolVar(&o.tls.SSL, "grpc-server-ssl", false, "serve P4Runtime over TLS (needs --grpc-server-cert and --grpc-server-key)")
	fs.StringVar(&o.tls.CACert, "grpc-server-cacert", "", "PEM CA certificate that client certificates must chain to")
	fs.StringVar(&o.tls.Cert, "grpc-server-cert", "", "PEM server certificate (chain)")
	fs.StringVar(&o.tls.Key, "grpc-server-key", "", "PEM private key of --grpc-server-cert")
	fs.BoolVar(&o.tls.ClientAuth, "grpc-server-with-client-auth", false, "mutual TLS: refuse clients without a certificate signed by --grpc-server-cacert")
	fs.Bool("no-p4", false, "accepted for simple_switch_grpc compatibility (the pipeline is built in)")
	fs.Bool("log-flush", false, "accepted for simple_switch_grpc compatibility (logs are unbuffered)")
	fs.Bool("log-console", false, "accepted for simple_switch_grpc compatibility (logs go to stderr by default)")
	fs.Int("thrift-port", 0, "accepted for simple_switch_grpc compatibility (no Thrift server)")

	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		if rest[0] == "-" {
			return nil, errors.New(`unexpected argument "-"`)
		}
		if !strings.HasPrefix(rest[0], "-") {
			if !strings.HasSuffix(rest[0], ".json") {
				return nil, fmt.Errorf("unexpected argument %q", rest[0])
			}
			o.ignoredJSON = append(o.ignoredJSON, rest[0])
			rest = rest[1:]
		}
	}
	if o.teardown {
		return o, nil // needs only the device id and the directories
	}
	if *cpu > 0xffff {
		return nil, fmt.Errorf("--cpu-port %d does not fit in 16 bits", *cpu)
	}
	o.cpuPort = uint16(*cpu)
	if len(ifaces.ports) == 0 {
		return nil, errors.New("no front port: give at least one -i PORT@IFACE")
	}
	if _, ok := ifaces.ports[o.cpuPort]; ok {
		return nil, fmt.Errorf("port %d is the CPU port (--cpu-port) and cannot be a front port", o.cpuPort)
	}
	o.ports = ifaces.ports
	if err := o.tls.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}
