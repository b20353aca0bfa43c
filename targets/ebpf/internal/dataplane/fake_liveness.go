package dataplane

import "fmt"

func (f *Fake) checkLivenessPort(what string, port uint16, limit int) error {
	if int(port) >= limit {
		return fmt.Errorf("%s: port %d not in [0, %d): %w", what, port, limit, ErrOutOfRange)
	}
	return nil
}

func (f *Fake) SetGatewayBackup(gateway uint16, b GatewayBackup) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLivenessPort("gateway_backups", gateway, f.limits.backups); err != nil {
		return err
	}
	if b.Timeout <= 0 {
		return fmt.Errorf("gateway_backups: port %d: timeout %v must be positive", gateway, b.Timeout)
	}
	f.backups[gateway] = b
	return nil
}

func (f *Fake) DeleteGatewayBackup(gateway uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLivenessPort("gateway_backups", gateway, f.limits.backups); err != nil {
		return err
	}
	return remove(f.backups, gateway, fmt.Sprintf("gateway backup of port %d", gateway))
}

// GatewayBackups returns what SetGatewayBackup stored, by gateway port.
func (f *Fake) GatewayBackups() map[uint16]GatewayBackup {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[uint16]GatewayBackup, len(f.backups))
	for k, v := range f.backups {
		out[k] = v
	}
	return out
}

func (f *Fake) PortCounter(c PortCounter, port uint16) (Counter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.portCtr[c]
	if !ok {
		return Counter{}, fmt.Errorf("port counter %d: %w", c, ErrNotFound)
	}
	if err := f.checkLivenessPort("port counter", port, f.limits.livenessPorts); err != nil {
		return Counter{}, err
	}
	return m[port], nil
}

func (f *Fake) SetPortCounter(c PortCounter, port uint16, v Counter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.portCtr[c]
	if !ok {
		return fmt.Errorf("port counter %d: %w", c, ErrNotFound)
	}
	if err := f.checkLivenessPort("port counter", port, f.limits.livenessPorts); err != nil {
		return err
	}
	m[port] = v
	return nil
}
