package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseArgsBMv2Style(t *testing.T) {
	o, err := parseArgs(strings.Fields("--device-id 3 -i 1@veth1 -i 2@veth3 --log-file /tmp/x --log-flush --no-p4 -- --grpc-server-addr 127.0.0.1:50800 --cpu-port 510"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.deviceID != 3 || o.grpcAddr != "127.0.0.1:50800" || o.cpuPort != 510 || o.ports[1] != "veth1" || o.ports[2] != "veth3" || o.logFile != "/tmp/x" {
		t.Fatalf("%+v", o)
	}
}

func TestParseArgsDefaultsAndJSON(t *testing.T) {
	o, err := parseArgs([]string{"-i", "0@eth0", "build/supergw.json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.grpcAddr != "0.0.0.0:9559" || o.cpuPort != 255 || o.deviceID != 0 || o.logLevel != "warn" || o.pinRoot != "/sys/fs/bpf/supergw" {
		t.Fatalf("defaults: %+v", o)
	}
	if len(o.ignoredJSON) != 1 {
		t.Fatalf("json path: %v", o.ignoredJSON)
	}
}

func TestParseArgsErrors(t *testing.T) {
	for _, args := range []string{
		"",                              // no port
		"-i 1",                          // no @
		"-i x@eth0",                     // bad number
		"-i 70000@eth0",                 // too big
		"-i 1@a -i 1@b",                 // duplicate port
		"-i 1@a -i 2@a",                 // duplicate interface
		"-i 255@a",                      // CPU port as front port
		"-i 1@a --cpu-port 70000",       // CPU port too big
		"-i 1@a stray",                  // positional that is not a JSON path
		"-i 1@a --no-such-flag",         // unknown flag
		"-i 1@a -- --device-id notanum", // bad value after --
	} {
		if _, err := parseArgs(strings.Fields(args), io.Discard); err == nil {
			t.Errorf("%q: want error", args)
		}
	}
}

func TestParseArgsTLSFlagsLikeSimpleSwitchGrpc(t *testing.T) {
	o, err := parseArgs(strings.Fields("-i 1@a -- --grpc-server-ssl --grpc-server-cert s.crt --grpc-server-key s.key --grpc-server-cacert ca.crt --grpc-server-with-client-auth"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.tls.SSL || o.tls.Cert != "s.crt" || o.tls.Key != "s.key" || o.tls.CACert != "ca.crt" || !o.tls.ClientAuth || o.tls.Mode() != "mutual TLS" {
		t.Fatalf("%+v", o.tls)
	}
	o, err = parseArgs(strings.Fields("-i 1@a"), io.Discard)
	if err != nil || o.tls.SSL || o.tls.Mode() != "plaintext" {
		t.Fatalf("default must be plaintext: %+v %v", o.tls, err)
	}
	for _, args := range []string{
		"-i 1@a --grpc-server-cert s.crt", // cert without ssl
		"-i 1@a --grpc-server-ssl",        // ssl without cert/key
		"-i 1@a --grpc-server-ssl --grpc-server-cert s --grpc-server-key k --grpc-server-with-client-auth", // no CA
	} {
		if _, err := parseArgs(strings.Fields(args), io.Discard); err == nil {
			t.Errorf("%q: want error", args)
		}
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:9559": true, "[::1]:9559": true, "localhost:1": true, "0.0.0.0:9559": false, "10.0.0.1:1": false, "bad": false} {
		if loopback(addr) != want {
			t.Errorf("%s: want %v", addr, want)
		}
	}
}

func TestLogLevels(t *testing.T) {
	for _, l := range []string{"trace", "debug", "info", "warn", "error", "off"} {
		if _, _, err := newLogger(l, ""); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
	if _, _, err := newLogger("loud", ""); err == nil {
		t.Error("unknown level accepted")
	}
}
