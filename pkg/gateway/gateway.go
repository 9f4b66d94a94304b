package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Bounds and timeouts of the gateway's HTTP.
const (
	MaxRequestBytes        = 32 << 20 // one request body
	MaxRequestHeaderBytes  = 64 << 10
	MaxResponseHeaderBytes = 1 << 20
	readHeaderTimeout      = 10 * time.Second
	idleTimeout            = 2 * time.Minute
	dialTimeout            = 30 * time.Second
	tlsHandshakeTimeout    = 30 * time.Second
	// responseHeaderTimeout bounds the wait for the upstream's status
	// line: a non-streamed answer comes only after the whole generation.
	responseHeaderTimeout = 15 * time.Minute
	copyBuffer            = 32 << 10
)

// Gateway serves every configured provider on one loopback port.
type Gateway struct {
	providers map[string]*upstream
	rt        http.RoundTripper

	mu     sync.Mutex
	grants map[[32]byte]*Grant

	srv  *http.Server
	ln   net.Listener
	url  string
	done chan struct{}
}

// upstream is one provider with its key.
type upstream struct {
	Provider
	key string
}

// New returns a gateway for providers, keys[i] being the key of
// providers[i] (each must satisfy ValidKey). It listens on nothing yet.
// Upstream requests go through NewTransport's transport.
func New(providers []Provider, keys []string) (*Gateway, error) {
	if len(keys) != len(providers) {
		return nil, errors.New("gateway: one key per provider")
	}
	g := &Gateway{providers: map[string]*upstream{}, rt: NewTransport(), grants: map[[32]byte]*Grant{}, done: make(chan struct{})}
	for i, p := range providers {
		if !ValidKey(keys[i]) {
			return nil, errors.New("gateway: a provider key is not 16 to 4096 bytes of visible ASCII")
		}
		g.providers[p.ID] = &upstream{Provider: p, key: keys[i]}
	}
	return g, nil
}

// NewTransport returns the upstream transport: the system's trust roots
// (Go honours SSL_CERT_FILE and SSL_CERT_DIR), no proxy, no compression
// added or undone, HTTP/2 when the provider offers it, bounded dial,
// handshake and header waits.
func NewTransport() *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		ResponseHeaderTimeout:  responseHeaderTimeout,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		DisableCompression:     true,
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
	}
}

// Secrets returns every provider key the gateway holds: the values no
// candidate or evidence may carry.
func (g *Gateway) Secrets() []string {
	out := make([]string, 0, len(g.providers))
	for _, u := range g.providers {
		out = append(out, u.key)
	}
	return out
}

// Listen starts serving on addr (host:port, the host a loopback address;
// "127.0.0.1:0" picks a free port) until Close.
func (g *Gateway) Listen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("gateway: listen address is not host:port")
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return errors.New("gateway: listen address is not a loopback IP")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.New("gateway: cannot listen on the loopback address")
	}
	g.ln = ln
	g.url = "http://" + ln.Addr().String()
	g.srv = &http.Server{
		Handler:           g,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    MaxRequestHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(g.done)
		_ = g.srv.Serve(ln)
	}()
	return nil
}

// URL is http://HOST:PORT of the listener ("" before Listen).
func (g *Gateway) URL() string { return g.url }

// Port is the listener's TCP port (0 before Listen): the one port an
// attempt needs to reach.
func (g *Gateway) Port() int {
	if g.ln == nil {
		return 0
	}
	return g.ln.Addr().(*net.TCPAddr).Port
}

// Close stops the listener and cuts every grant's requests.
func (g *Gateway) Close() error {
	g.mu.Lock()
	grants := make([]*Grant, 0, len(g.grants))
	for _, gr := range g.grants {
		grants = append(grants, gr)
	}
	g.mu.Unlock()
	for _, gr := range grants {
		gr.Revoke()
	}
	if g.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := g.srv.Shutdown(ctx)
	if err != nil {
		g.srv.Close()
	}
	<-g.done
	return nil
}

// ProviderURL is the base URL an agent uses for provider id.
func ProviderURL(gatewayURL, id string) string { return gatewayURL + "/" + id }
