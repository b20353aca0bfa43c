package grpctls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, cn string) ca {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return ca{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf writes a certificate and key signed by c to dir and returns their paths.
func (c ca) leaf(t *testing.T, dir, name string, usage x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certPath, keyPath
}

func TestValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Cert: "c"}, "--grpc-server-cert needs --grpc-server-ssl"},
		{Options{CACert: "c"}, "--grpc-server-cacert needs --grpc-server-ssl"},
		{Options{ClientAuth: true}, "--grpc-server-with-client-auth needs --grpc-server-ssl"},
		{Options{SSL: true, Cert: "c"}, "needs --grpc-server-cert and --grpc-server-key"},
		{Options{SSL: true, Cert: "c", Key: "k", ClientAuth: true}, "needs --grpc-server-cacert"},
	} {
		err := tc.o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.o, err, tc.want)
		}
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("plaintext: %v", err)
	}
}

func TestBadFilesAreClearErrors(t *testing.T) {
	dir := t.TempDir()
	root := newCA(t, "root")
	cert, key := root.leaf(t, dir, "server", x509.ExtKeyUsageServerAuth)
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not pem"), 0o600)
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{SSL: true, Cert: filepath.Join(dir, "nope.crt"), Key: key}, "--grpc-server-cert"},
		{Options{SSL: true, Cert: cert, Key: filepath.Join(dir, "p4rt-sw.key")},
			"--grpc-server-key: file not found: " + dir + "/p4rt-sw.key: make it with `supergw-gateway pki --out DIR --server p4rt-sw=ADDRESS[,NAME]`"},
		{Options{SSL: true, Cert: cert, Key: key, CACert: filepath.Join(dir, "ca.crt")},
			"--grpc-server-cacert: file not found: " + dir + "/ca.crt: copy there the ca.crt of the site's CA"},
		{Options{SSL: true, Cert: cert, Key: junk}, "--grpc-server-key"},
		{Options{SSL: true, Cert: cert, Key: key, CACert: filepath.Join(dir, "nope.pem")}, "--grpc-server-cacert"},
		{Options{SSL: true, Cert: cert, Key: key, CACert: junk}, "no PEM certificate"},
	} {
		if _, err := tc.o.ServerCredentials(log); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.o, err, tc.want)
		}
	}
}

// serve starts a gRPC health server with the options' credentials on loopback.
func serve(t *testing.T, o Options, logw io.Writer) string {
	t.Helper()
	creds, err := o.ServerCredentials(slog.New(slog.NewTextHandler(logw, nil)))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func check(addr string, cfg *tls.Config) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

type syncBuf struct {
	ch chan string
}

func (b syncBuf) Write(p []byte) (int, error) { b.ch <- string(p); return len(p), nil }

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	root, rogue := newCA(t, "root"), newCA(t, "rogue")
	srvCert, srvKey := root.leaf(t, dir, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := root.leaf(t, dir, "client", x509.ExtKeyUsageClientAuth)
	rogCert, rogKey := rogue.leaf(t, dir, "rogue", x509.ExtKeyUsageClientAuth)
	caPath := filepath.Join(dir, "ca.crt")
	os.WriteFile(caPath, root.pem, 0o600)
	logs := syncBuf{make(chan string, 100)}
	addr := serve(t, Options{SSL: true, Cert: srvCert, Key: srvKey, CACert: caPath, ClientAuth: true}, logs)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root.pem)
	pair := func(c, k string) []tls.Certificate {
		p, err := tls.LoadX509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{p}
	}
	if err := check(addr, &tls.Config{RootCAs: pool, Certificates: pair(cliCert, cliKey)}); err != nil {
		t.Fatalf("valid client certificate refused: %v", err)
	}
	for name, cfg := range map[string]*tls.Config{
		"no client certificate":   {RootCAs: pool},
		"certificate of other CA": {RootCAs: pool, Certificates: pair(rogCert, rogKey)},
	} {
		if err := check(addr, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
		select {
		case line := <-logs.ch:
			if !strings.Contains(line, "P4Runtime TLS handshake refused") || !strings.Contains(line, "peer=127.0.0.1:") {
				t.Errorf("%s: log line %q", name, line)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("%s: no log line for the refused handshake", name)
		}
	}
	// A client that does not trust the server's CA gives up on its own.
	if err := check(addr, &tls.Config{Certificates: pair(cliCert, cliKey)}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted server accepted: %v", err)
	}
}

func TestServerOnlyTLSAcceptsClientsWithoutCertificates(t *testing.T) {
	dir := t.TempDir()
	root := newCA(t, "root")
	srvCert, srvKey := root.leaf(t, dir, "server", x509.ExtKeyUsageServerAuth)
	addr := serve(t, Options{SSL: true, Cert: srvCert, Key: srvKey}, io.Discard)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root.pem)
	if err := check(addr, &tls.Config{RootCAs: pool}); err != nil {
		t.Fatal(err)
	}
}
