package main

// takeover.go: a restart without loss. A new instance adopts the running data plane of its
// predecessor (dataplane.Open: maps reused, links moved), restores the P4Runtime state from
// the predecessor's journal into it before the ports move, and on exit leaves everything
// running for the next one (targets/ebpf/README.md, "Restart without loss").

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"

	"supergw/targets/ebpf/internal/dataplane"
	"supergw/targets/ebpf/internal/p4rt"
)

// DefaultStateRoot holds the journals: /run, like the bpffs pins, does not outlive a boot.
const DefaultStateRoot = "/run/supergw-switch"

func (o *options) pinDir() string {
	return filepath.Join(o.pinRoot, strconv.FormatUint(o.deviceID, 10))
}

func (o *options) stateDir() string {
	return filepath.Join(o.stateRoot, strconv.FormatUint(o.deviceID, 10))
}

// startDataplane opens the data plane (adopting a running predecessor) and the journal.
func startDataplane(o *options, logger *slog.Logger) (*dataplane.EBPF, *p4rt.Journal, error) {
	dp, err := dataplane.Open(dataplane.Config{
		DeviceID:            o.deviceID,
		Ports:               o.ports,
		CPUPort:             o.cpuPort,
		PinDir:              o.pinDir(),
		ReplaceIncompatible: o.replaceIncompatible,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("start data plane: %w", err)
	}
	j, err := p4rt.OpenJournal(o.stateDir())
	if err != nil {
		return nil, nil, errors.Join(err, dp.Close())
	}
	a := dp.Adoption()
	if len(a.Replaced) > 0 {
		logger.Warn("data plane: "+a.String(), "pin_dir", o.pinDir())
	} else {
		logger.Info("data plane: "+a.String(), "pin_dir", o.pinDir())
	}
	return dp, j, nil
}

// takeOver fills the server (and through it the data plane) from the predecessor's journal
// when there was a running predecessor, else starts the journal afresh; then moves the
// ports to this instance's program.
func takeOver(dp *dataplane.EBPF, srv *p4rt.Server, j *p4rt.Journal, logger *slog.Logger) error {
	if dp.Adoption().Live {
		rep, err := srv.Restore(j)
		switch {
		case err != nil:
			// The maps still forward; the controller pushes its pipeline and reconciles.
			logger.Warn("P4Runtime state not restored: the controller will push its pipeline and rewrite its entries",
				"err", err)
			if err := srv.UseJournal(j); err != nil {
				return err
			}
		default:
			logger.Info("P4Runtime state restored from the journal", "cookie", rep.Cookie, "updates", rep.Applied,
				"refused", len(rep.Failed), "torn_last_record", rep.Torn)
			for _, f := range rep.Failed {
				logger.Warn("journal update not restored", "update", f)
			}
		}
	} else if err := srv.UseJournal(j); err != nil {
		return err
	}
	if err := dp.Attach(); err != nil {
		return fmt.Errorf("attach data plane: %w", err)
	}
	return nil
}

// teardown removes what a previous instance of this device left running.
func teardown(o *options, logger *slog.Logger) error {
	if err := dataplane.Teardown(o.pinDir()); err != nil {
		return fmt.Errorf("teardown of %s: %w", o.pinDir(), err)
	}
	j, err := p4rt.OpenJournal(o.stateDir())
	if err != nil {
		return err
	}
	if err := j.Remove(); err != nil {
		return err
	}
	logger.Info("data plane removed", "pin_dir", o.pinDir(), "state_dir", o.stateDir())
	return nil
}
