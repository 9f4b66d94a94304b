package providerfake

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"time"
)

// NewTLS makes a fresh certificate authority and a server certificate it
// signs for 127.0.0.1, ::1 and localhost, writes the authority's
// certificate as PEM to caFile (mode 0600) and returns the server's TLS
// configuration. A client trusts the fake the way it trusts any
// provider: through its trust roots, for a Go program the file named by
// SSL_CERT_FILE.
func NewTLS(caFile string) (*tls.Config, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "providerfake test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	pemCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if pemCA == nil {
		return nil, errors.New("providerfake: cannot encode the CA")
	}
	if err := os.WriteFile(caFile, pemCA, 0o600); err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// sniffListener serves TLS and plain HTTP on one port: each accepted
// connection's first byte (a TLS handshake record starts with 0x16)
// decides, read within sniffTimeout by the connection's own goroutine.
type sniffListener struct {
	net.Listener
	cfg   *tls.Config
	conns chan net.Conn
	errc  chan error
}

const sniffTimeout = 10 * time.Second

func newSniffListener(l net.Listener, cfg *tls.Config) *sniffListener {
	s := &sniffListener{Listener: l, cfg: cfg, conns: make(chan net.Conn), errc: make(chan error, 1)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				s.errc <- err
				return
			}
			go s.sniff(c)
		}
	}()
	return s
}

func (s *sniffListener) sniff(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	var conn net.Conn = &peekedConn{Conn: c, r: br}
	if first[0] == 0x16 {
		conn = tls.Server(conn, s.cfg)
	}
	s.conns <- conn
}

func (s *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case err := <-s.errc:
		return nil, err
	}
}

// peekedConn reads first what sniffing buffered.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
