package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstream is a TCP server standing in for a registry: it answers
// "echo:" and what it read, line by line.
func upstream(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					io.WriteString(c, "echo:"+l)
				}
			}()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

type refusals struct {
	mu  sync.Mutex
	got []string
}

func (r *refusals) add(host string, port uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, net.JoinHostPort(host, itoa(port)))
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func itoa(p uint16) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), p).String()[len("0.0.0.0:"):]
}

// testProxy is a proxy allowing registry.test on the upstream's port,
// which resolves to the upstream (a loopback address, which the test
// lets the proxy reach) and loopback-only.test, which resolves to
// loopback only and is refused as unreachable.
func testProxy(t *testing.T, up netip.AddrPort) (*Proxy, *refusals) {
	t.Helper()
	allow, err := ParseAllow([]string{"registry.test:" + itoa(up.Port()), "loopback-only.test:" + itoa(up.Port())})
	if err != nil {
		t.Fatal(err)
	}
	r := &refusals{}
	p, err := Listen(allow, r.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "registry.test":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254"), up.Addr()}, nil
		case "loopback-only.test":
			return []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.2")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	p.reachable = func(a netip.Addr) bool { return a == up.Addr() }
	return p, r
}

// request sends raw to the proxy and returns the status line and the
// connection, positioned after the head.
func request(t *testing.T, p *Proxy, raw string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Endpoint().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	status, _ := r.ReadString('\n')
	for {
		l, err := r.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	return strings.TrimSpace(status), c, r
}

// An allowed host:port is tunnelled (bytes sent with the request too), a
// name in upper case is the same name; every other host, port, method or
// malformed request is refused, and each refused CONNECT is counted by its
// host and port; a name that resolves only to loopback is refused.
func TestProxy(t *testing.T) {
	up := upstream(t)
	p, r := testProxy(t, up)
	port := itoa(up.Port())
	status, c, br := request(t, p, "CONNECT registry.test:"+port+" HTTP/1.1\r\nHost: registry.test:"+port+"\r\n\r\nearly\n")
	if status != "HTTP/1.1 200 Connection established" {
		t.Fatalf("allowed: %q", status)
	}
	if l, _ := br.ReadString('\n'); l != "echo:early\n" {
		t.Fatalf("early bytes: %q", l)
	}
	io.WriteString(c, "later\n")
	if l, _ := br.ReadString('\n'); l != "echo:later\n" {
		t.Fatalf("tunnel: %q", l)
	}
	if status, _, _ := request(t, p, "CONNECT REGISTRY.Test:"+port+" HTTP/1.0\r\n\r\n"); status != "HTTP/1.1 200 Connection established" {
		t.Errorf("upper case: %q", status)
	}
	for _, tc := range []struct{ raw, status string }{
		{"CONNECT evil.test:443 HTTP/1.1\r\n\r\n", "403 Forbidden"},
		{"CONNECT registry.test:1 HTTP/1.1\r\n\r\n", "403 Forbidden"},
		{"CONNECT 127.0.0.1:" + port + " HTTP/1.1\r\n\r\n", "403 Forbidden"},
		{"CONNECT [::1]:" + port + " HTTP/1.1\r\n\r\n", "403 Forbidden"},
		{"CONNECT registry.test.:" + port + " HTTP/1.1\r\n\r\n", "400 Bad Request"},
		{"CONNECT loopback-only.test:" + port + " HTTP/1.1\r\n\r\n", "502 Bad Gateway"},
		{"GET http://registry.test:" + port + "/ HTTP/1.1\r\nHost: registry.test\r\n\r\n", "405 Method Not Allowed"},
		{"CONNECT registry.test:" + port + " HTTP/2.0\r\n\r\n", "400 Bad Request"},
		{"CONNECT registry.test:" + port + " HTTP/1.1\r\n folded\r\n\r\n", "400 Bad Request"},
		{"CONNECT registry.test:0" + port + " HTTP/1.1\r\n\r\n", "400 Bad Request"},
		{"CONNECT registry.test:" + port + " HTTP/1.1\r\nX: " + strings.Repeat("a", MaxHeadBytes) + "\r\n\r\n", "400 Bad Request"},
	} {
		if status, _, _ := request(t, p, tc.raw); status != "HTTP/1.1 "+tc.status {
			t.Errorf("%.60q: %q, want %s", tc.raw, status, tc.status)
		}
	}
	want := []string{"evil.test:443", "registry.test:1", "127.0.0.1:" + port, "[::1]:" + port, "loopback-only.test:" + port}
	if got := r.list(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("refused %q, want %q", got, want)
	}
	// Close cuts the open tunnel.
	p.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadString('\n'); err == nil {
		t.Error("the tunnel outlived the proxy")
	}
}

// Close ends a lookup under way (a program left a CONNECT pending) rather
// than waiting for its timeout: the lookup sees its context cancelled,
// not expired.
func TestCloseEndsPendingLookup(t *testing.T) {
	allow, err := ParseAllow([]string{"registry.test:443"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Listen(allow, nil)
	if err != nil {
		t.Fatal(err)
	}
	started, ended := make(chan struct{}), make(chan error, 1)
	p.lookup = func(ctx context.Context, _ string) ([]netip.Addr, error) {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}
	c, err := net.Dial("tcp", p.Endpoint().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT registry.test:443 HTTP/1.1\r\nHost: registry.test:443\r\n\r\n")
	<-started
	p.Close()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the pending lookup ended with %v, want it cancelled by Close", err)
	}
}

// The default addresses a proxy refuses to connect to.
func TestReachable(t *testing.T) {
	for a, want := range map[string]bool{"127.0.0.1": false, "::1": false, "0.0.0.0": false, "169.254.169.254": false,
		"fe80::1": false, "224.0.0.1": false, "ff02::1": false, "0.1.2.3": false, "100.100.100.200": false, "100.64.0.1": false,
		"255.255.255.255": false, "240.0.0.1": false, "fd00:ec2::254": false, "::ffff:127.0.0.1": false, "::ffff:169.254.169.254": false,
		"10.0.0.1": true, "192.0.2.1": true, "2001:db8::1": true, "100.128.0.1": true, "fd00:ec2::253": true, "::ffff:192.0.2.1": true} {
		if Reachable(netip.MustParseAddr(a)) != want {
			t.Errorf("%s: %v", a, !want)
		}
	}
}

func TestParseAllow(t *testing.T) {
	got, err := ParseAllow([]string{"registry.npmjs.org:443", "10.0.0.1:8080", "[2001:db8::1]:443"})
	if err != nil || len(got) != 3 {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range [][]string{{"Registry.npmjs.org:443"}, {"registry.npmjs.org"}, {"registry.npmjs.org:0"}, {"registry.npmjs.org:65536"},
		{"*.npmjs.org:443"}, {"a..b:443"}, {"-a.b:443"}, {"2001:db8::1:443"}, {"1.2.3:443"}, {"a:443", "a:443"}, {"registry.npmjs.org:443/x"}} {
		if _, err := ParseAllow(bad); err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%q: error names the value: %v", bad, err)
		}
	}
	many := make([]string, MaxAllow+1)
	for i := range many {
		many[i] = "h" + itoa(uint16(i+1)) + ".test:443"
	}
	if _, err := ParseAllow(many); err == nil {
		t.Error("too many entries accepted")
	}
}

// FuzzParseConnect: any head parses without a panic, and a target it
// accepts is one ParseAllow would take back in the same form.
func FuzzParseConnect(f *testing.F) {
	f.Add([]byte("CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\n\r\n"))
	f.Add([]byte("CONNECT [2001:db8::1]:443 HTTP/1.0\r\n\r\n"))
	f.Add([]byte("GET http://x/ HTTP/1.1\r\n\r\n"))
	f.Add([]byte("CONNECT a:1 HTTP/1.1\r\n x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, head []byte) {
		host, port, err := parseConnect(head)
		if err != nil {
			if host != "" || port != 0 {
				t.Fatal("a value with an error")
			}
			return
		}
		if port == 0 || host == "" || strings.ContainsAny(host, " \r\n\x00") {
			t.Fatalf("accepted %q %d", host, port)
		}
		target := host
		if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
			target = "[" + host + "]"
		}
		if _, err := ParseAllow([]string{target + ":" + itoa(port)}); err != nil {
			t.Fatalf("accepted target %q:%d is no allow entry: %v", host, port, err)
		}
	})
}
