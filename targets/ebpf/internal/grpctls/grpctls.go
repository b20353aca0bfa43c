// Package grpctls builds the P4Runtime server's transport credentials from
// simple_switch_grpc's TLS options (--grpc-server-ssl, --grpc-server-cert,
// --grpc-server-key, --grpc-server-cacert, --grpc-server-with-client-auth).
// Without --grpc-server-ssl the server is plaintext, as BMv2's is.
package grpctls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/credentials"
)

// Options mirror simple_switch_grpc's flags of the same names.
type Options struct {
	SSL        bool   // --grpc-server-ssl
	CACert     string // --grpc-server-cacert: CA that signs client certificates
	Cert       string // --grpc-server-cert
	Key        string // --grpc-server-key
	ClientAuth bool   // --grpc-server-with-client-auth: require a client certificate signed by CACert
}

// Validate reports an option that cannot work, naming the flag to fix.
func (o Options) Validate() error {
	if !o.SSL {
		for _, f := range []struct {
			flag string
			set  bool
		}{
			{"--grpc-server-cert", o.Cert != ""}, {"--grpc-server-key", o.Key != ""},
			{"--grpc-server-cacert", o.CACert != ""}, {"--grpc-server-with-client-auth", o.ClientAuth},
		} {
			if f.set {
				return fmt.Errorf("%s needs --grpc-server-ssl (without it the server is plaintext)", f.flag)
			}
		}
		return nil
	}
	if o.Cert == "" || o.Key == "" {
		return errors.New("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key")
	}
	if o.ClientAuth && o.CACert == "" {
		return errors.New("--grpc-server-with-client-auth needs --grpc-server-cacert (the CA that signs client certificates)")
	}
	return nil
}

// Mode names the transport for the start-up log line.
func (o Options) Mode() string {
	switch {
	case !o.SSL:
		return "plaintext"
	case o.ClientAuth:
		return "mutual TLS"
	default:
		return "TLS"
	}
}

// ServerCredentials loads the files; nil credentials mean plaintext. Every
// refused handshake is logged with the peer and the reason, since the client
// only sees a closed connection.
func (o Options) ServerCredentials(logger *slog.Logger) (credentials.TransportCredentials, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !o.SSL {
		return nil, nil
	}
	if err := o.filesExist(); err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(o.Cert, o.Key)
	if err != nil {
		return nil, fmt.Errorf("--grpc-server-cert %s / --grpc-server-key %s: %w", o.Cert, o.Key, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, ClientAuth: tls.NoClientCert}
	if o.CACert != "" {
		pem, err := os.ReadFile(o.CACert)
		if err != nil {
			return nil, fmt.Errorf("--grpc-server-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--grpc-server-cacert %s: no PEM certificate in it", o.CACert)
		}
		cfg.ClientCAs = pool
		if o.ClientAuth {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return &logged{TransportCredentials: credentials.NewTLS(cfg), logger: logger}, nil
}

// filesExist names the first missing file and the `supergw-gateway pki` command
// that makes it (the Python programs' wording: supergw_proto/certfiles.py). pki
// writes NAME.crt and NAME.key for --server NAME=..., and the CA as ca.crt.
func (o Options) filesExist() error {
	const guide = `docs/deploy-linux.md, "Certificates"`
	for _, f := range []struct{ flag, path string }{
		{"--grpc-server-cert", o.Cert}, {"--grpc-server-key", o.Key}, {"--grpc-server-cacert", o.CACert},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if f.flag == "--grpc-server-cacert" {
			return fmt.Errorf("%s: file not found: %s: copy there the ca.crt of the site's CA "+
				"(`supergw-gateway pki --out DIR ...` makes DIR/ca.crt with the first certificate; %s)", f.flag, f.path, guide)
		}
		name := strings.TrimSuffix(filepath.Base(f.path), filepath.Ext(f.path))
		return fmt.Errorf("%s: file not found: %s: make it with `supergw-gateway pki --out DIR --server %s=ADDRESS[,NAME]` "+
			"(on the box that keeps the CA) and copy DIR/%s.crt and DIR/%s.key there, the key mode 0600 (%s)",
			f.flag, f.path, name, name, name, guide)
	}
	return nil
}

type logged struct {
	credentials.TransportCredentials
	logger *slog.Logger
}

func (l *logged) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := l.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		l.logger.Warn("P4Runtime TLS handshake refused", "peer", raw.RemoteAddr().String(), "error", err.Error())
	}
	return conn, info, err
}

func (l *logged) Clone() credentials.TransportCredentials {
	return &logged{TransportCredentials: l.TransportCredentials.Clone(), logger: l.logger}
}

// Compile-time check that the wrapper still satisfies the interface.
var _ credentials.TransportCredentials = (*logged)(nil)
