// Command supergw-switch is the P4Runtime server of the eBPF target: a
// drop-in for simple_switch_grpc that runs the supergw pipeline on Linux
// interfaces with tc/TCX eBPF programs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"

	"supergw/targets/ebpf/internal/p4rt"
)

func main() {
	opts, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, errHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "supergw-switch: %v\n", err)
		os.Exit(2)
	}
	if err := run(opts); err != nil {
		log.Fatalf("supergw-switch: %v", err)
	}
}

func newLogger(level, file string) (*slog.Logger, io.Closer, error) {
	var lvl slog.Level
	switch level {
	case "trace", "debug":
		lvl = slog.LevelDebug
	case "info":
		lvl = slog.LevelInfo
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error", "critical":
		lvl = slog.LevelError
	case "off":
		return slog.New(slog.DiscardHandler), io.NopCloser(nil), nil
	default:
		return nil, nil, fmt.Errorf("--log-level %q: want one of trace, debug, info, warn, error, off", level)
	}
	var w io.Writer = os.Stderr
	var closer io.Closer = io.NopCloser(nil)
	if file != "" {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("open log file: %w", err)
		}
		w, closer = f, f
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), closer, nil
}

func run(o *options) error {
	logger, closer, err := newLogger(o.logLevel, o.logFile)
	if err != nil {
		return err
	}
	defer closer.Close()
	if o.teardown {
		return teardown(o, logger)
	}
	for _, p := range o.ignoredJSON {
		logger.Warn("ignoring BMv2 JSON argument: this target runs only the built-in supergw pipeline", "path", p)
	}

	// Credentials before anything else: a bad certificate is an error at once.
	creds, err := o.tls.ServerCredentials(logger)
	if err != nil {
		return err
	}
	if creds == nil && !loopback(o.grpcAddr) {
		logger.Warn("P4Runtime is plaintext on a non-loopback address: anyone who reaches it can control the switch; "+
			"give --grpc-server-ssl with --grpc-server-with-client-auth", "addr", o.grpcAddr)
	}
	lis, err := net.Listen("tcp", o.grpcAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.grpcAddr, err)
	}
	dp, j, err := startDataplane(o, logger)
	if err != nil {
		lis.Close()
		return err
	}
	srv, err := p4rt.New(p4rt.Config{DeviceID: o.deviceID, Dataplane: dp, Logger: logger})
	if err != nil {
		lis.Close()
		return errors.Join(fmt.Errorf("start P4Runtime server: %w", err), dp.Close())
	}
	if err := takeOver(dp, srv, j, logger); err != nil {
		lis.Close()
		return errors.Join(err, dp.Close())
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runCtx, cancelRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		srv.Run(runCtx)
	}()

	serverOpts := []grpc.ServerOption{grpc.MaxRecvMsgSize(64 << 20)}
	if creds != nil {
		serverOpts = append(serverOpts, grpc.Creds(creds))
	}
	gs := grpc.NewServer(serverOpts...)
	p4v1.RegisterP4RuntimeServer(gs, srv)
	serveErr := make(chan error, 1)
	go func() { serveErr <- gs.Serve(lis) }()
	logger.Info("serving P4Runtime", "addr", lis.Addr().String(), "transport", o.tls.Mode(), "device_id", o.deviceID, "ports", o.ports, "cpu_port", o.cpuPort)

	var result error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		result = fmt.Errorf("gRPC server: %w", err)
	}
	stopGRPC(gs)
	cancelRun()
	<-runDone
	if o.teardownOnExit {
		result = errors.Join(result, dp.Close(), j.Remove())
		logger.Info("data plane taken down")
	} else {
		result = errors.Join(result, dp.Release(), j.Close())
		logger.Info("data plane left forwarding for the next instance (supergw-switch --teardown removes it)",
			"pin_dir", dp.PinDir(), "journal", j.Path())
	}
	return result
}

// loopback reports whether addr ("host:port") listens on a loopback address only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// stopGRPC lets in-flight RPCs finish briefly; open StreamChannels never end on
// their own, so it then cuts them.
func stopGRPC(gs *grpc.Server) {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		gs.Stop()
		<-done
	}
}
