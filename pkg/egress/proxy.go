package egress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Bounds of one proxy.
const (
	// HeadTimeout bounds reading a request's head.
	HeadTimeout = 10 * time.Second
	// ResolveTimeout bounds resolving an allowed name.
	ResolveTimeout = 10 * time.Second
	// DialTimeout bounds connecting to a resolved address.
	DialTimeout = 15 * time.Second
	// MaxTunnels bounds the tunnels open at once; more are refused (503).
	MaxTunnels = 64
)

// Proxy is one attempt's CONNECT proxy (see the package documentation).
type Proxy struct {
	ln      net.Listener
	allow   []string // keys
	refused func(host string, port uint16)
	// lookup resolves a name (net.DefaultResolver's LookupNetIP);
	// reachable says which resolved addresses it connects to (Reachable).
	lookup    func(ctx context.Context, host string) ([]netip.Addr, error)
	reachable func(netip.Addr) bool
	// ctx ends every lookup and dial under way when Close cancels it,
	// so a program that leaves a CONNECT pending cannot hold its
	// attempt's end for the resolve and dial timeouts.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Listen starts a proxy on a free port of 127.0.0.1 for the hosts of
// allow (as ParseAllow returns them); refused, when set, is called with
// the host and port of every request it refuses. Close stops it.
func Listen(allow []string, refused func(host string, port uint16)) (*Proxy, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, errors.New("egress: cannot listen on loopback")
	}
	if refused == nil {
		refused = func(string, uint16) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, allow: allow, refused: refused, conns: map[net.Conn]struct{}{},
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}, reachable: Reachable, ctx: ctx, cancel: cancel}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Endpoint is the proxy's loopback address and port.
func (p *Proxy) Endpoint() netip.AddrPort {
	return p.ln.Addr().(*net.TCPAddr).AddrPort()
}

// URL is http://127.0.0.1:PORT, for HTTPS_PROXY.
func (p *Proxy) URL() string { return "http://" + p.Endpoint().String() }

// Close stops the proxy, ends every lookup and dial under way and cuts
// every tunnel; it returns once all are gone.
func (p *Proxy) Close() {
	p.cancel()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// track adds c to the connections Close cuts; false when closed or full.
func (p *Proxy) track(c net.Conn, limit int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.conns) >= limit {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		// A client and its upstream count as two.
		if !p.track(c, 2*MaxTunnels) {
			c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// answer writes a short refusal.
func answer(c net.Conn, status string) {
	c.SetWriteDeadline(time.Now().Add(HeadTimeout))
	io.WriteString(c, "HTTP/1.1 "+status+"\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
}

// handle serves one client connection: one CONNECT, then its tunnel.
func (p *Proxy) handle(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(HeadTimeout))
	head, early, err := readHead(c)
	if err != nil {
		answer(c, "400 Bad Request")
		return
	}
	host, port, err := parseConnect(head)
	switch {
	case errors.Is(err, errMethod):
		answer(c, "405 Method Not Allowed") // only CONNECT: the tunnel carries the client's TLS
		return
	case err != nil:
		answer(c, "400 Bad Request")
		return
	}
	if !p.allows(host, port) {
		p.refused(host, port)
		answer(c, "403 Forbidden")
		return
	}
	up, ok := p.dial(host, port)
	if !ok {
		p.refused(host, port)
		answer(c, "502 Bad Gateway")
		return
	}
	if !p.track(up, 2*MaxTunnels+1) {
		up.Close()
		answer(c, "503 Service Unavailable")
		return
	}
	defer p.untrack(up)
	c.SetReadDeadline(time.Time{})
	c.SetWriteDeadline(time.Now().Add(HeadTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	c.SetWriteDeadline(time.Time{})
	if len(early) > 0 {
		if _, err := up.Write(early); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// allows reports whether host:port is on the list.
func (p *Proxy) allows(host string, port uint16) bool {
	k := key(host, port)
	for _, a := range p.allow {
		if a == k {
			return true
		}
	}
	return false
}

// dial resolves host (after the check) and connects to the first of its
// addresses a registry can have that answers.
func (p *Proxy) dial(host string, port uint16) (net.Conn, bool) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ctx, cancel := context.WithTimeout(p.ctx, ResolveTimeout)
		addrs, err = p.lookup(ctx, host)
		cancel()
		if err != nil {
			return nil, false
		}
	}
	d := net.Dialer{Timeout: DialTimeout}
	for _, a := range addrs {
		a = a.Unmap()
		if !p.reachable(a) {
			continue
		}
		up, err := d.DialContext(p.ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			return up, true
		}
	}
	return nil, false
}

// unreachable are the ranges beyond the address kinds Reachable names
// that the proxy never connects to: "this network" (0/8, which Linux
// routes to this host), the shared address space (100.64/10, where a
// cloud keeps a metadata service: 100.100.100.200), the reserved 240/4
// with broadcast, and the IPv6 metadata service of another (fd00:ec2::254).
var unreachable = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// Reachable reports whether the proxy connects to an address at all: not
// loopback (the gateway, the Gate), unspecified, link-local (a cloud's
// metadata service), multicast or a range of unreachable; an IPv4 address
// mapped into IPv6 counts as itself.
func Reachable(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() {
		return false
	}
	for _, p := range unreachable {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// readHead reads up to and including the blank line that ends a request
// head, at most MaxHeadBytes, and returns what came after it (a client
// may send its first bytes without waiting for the answer).
func readHead(c net.Conn) (head, early []byte, err error) {
	buf := make([]byte, 0, 1024)
	tmp := make([]byte, 1024)
	for {
		n, err := c.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 && i+4 <= MaxHeadBytes {
			return buf[:i+4], buf[i+4:], nil
		}
		if len(buf) > MaxHeadBytes+3 || err != nil {
			return nil, nil, errMalformed
		}
	}
}
