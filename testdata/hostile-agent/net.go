package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// netTargets are the collector's network stand-ins (it names them on
// request): a TCP listener on a loopback port that is not the gateway's,
// the same listener on an address of this host that is not loopback, and
// a UDP responder that answers a DNS query for any name, and a pathname
// UNIX socket of the Worker's own account (a per-user service manager's
// stand-in).
type netTargets struct {
	TCP     string `json:"tcp"`
	TCPFar  string `json:"tcp_far"`
	UDP     string `json:"udp"`
	UnixOwn string `json:"unix_own"`
}

func (a *agent) askTargets() (netTargets, bool) {
	var t netTargets
	addr := os.Getenv("HOSTILE_REPORT")
	if addr == "" {
		return t, false
	}
	c, err := net.DialTimeout("unix", addr, 5*time.Second)
	if err != nil {
		return t, false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("{\"targets\":1}\n")); err != nil {
		return t, false
	}
	line, err := bufio.NewReader(c).ReadBytes('\n')
	return t, err == nil && json.Unmarshal(line, &t) == nil && t.TCP != ""
}

// probeNetwork tries the network around the gateway: a direct TCP
// connection to a loopback listener and to a non-loopback address, a DNS
// query over UDP for an arbitrary name, a TCP Fast Open send (which
// connects without connect(2)) and a connection to a UNIX socket of the
// Worker's own account. Each is reached when the collector's stand-in
// answered.
func (a *agent) probeNetwork() {
	t, ok := a.askTargets()
	if !ok {
		return
	}
	a.add("net-tcp-loopback", t.TCP, greeted(dialTCP(t.TCP)), nil)
	a.add("net-tcp-far", t.TCPFar, greeted(dialTCP(t.TCPFar)), nil)
	a.add("net-udp-dns", t.UDP, dnsAnswered(t.UDP), nil)
	a.add("net-fastopen", t.TCP, greeted(fastOpen(t.TCP)), nil)
	if t.UnixOwn != "" {
		c, _ := net.DialTimeout("unix", t.UnixOwn, 3*time.Second)
		a.add("net-unix-own-account", t.UnixOwn, greeted(c), nil)
	}
	a.probeProxy(t)
	// Bounded: unconfined in the script's namespace no server answers.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	ips, err := net.DefaultResolver.LookupHost(ctx, "hostile-agent-e2e.example")
	cancel()
	a.add("net-resolve", "hostile-agent-e2e.example", err == nil && len(ips) > 0, nil)
}

func dialTCP(addr string) net.Conn {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil
	}
	return c
}

// greeted reports whether c's peer said hello (the collector's listener
// does, to every connection it accepts).
func greeted(c net.Conn) bool {
	if c == nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "hello\n"
}

// fastOpen connects by a send with MSG_FASTOPEN.
func fastOpen(addr string) net.Conn {
	ap, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil || ap.IP.To4() == nil {
		return nil
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	sa := &syscall.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	if err := syscall.Sendto(fd, []byte("x"), 0x20000000, sa); err != nil { // MSG_FASTOPEN
		syscall.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "fastopen")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil
	}
	return c
}

// dnsAnswered sends a DNS query for an arbitrary name over UDP and
// reports whether an answer came back.
func dnsAnswered(addr string) bool {
	c, err := net.DialTimeout("udp", addr, 3*time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	q := []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range []string{"exfil-" + strconv.Itoa(os.Getpid()), "example"} {
		q = append(q, byte(len(l)))
		q = append(q, l...)
	}
	q = append(q, 0, 0, 1, 0, 1)
	if _, err := c.Write(q); err != nil {
		return false
	}
	b := make([]byte, 512)
	n, err := c.Read(b)
	return err == nil && n >= 2 && b[0] == 0x12 && b[1] == 0x34
}

// proxyConnect asks the CONNECT proxy at proxyURL (http://HOST:PORT) for
// a tunnel to target and reports whether the tunnel reached the
// collector's listener (its hello).
func proxyConnect(proxyURL, target string) bool {
	addr, ok := strings.CutPrefix(proxyURL, "http://")
	if !ok || addr == "" {
		return false
	}
	c := dialTCP(strings.TrimSuffix(addr, "/"))
	if c == nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")); err != nil {
		return false
	}
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		return false
	}
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		if l == "\r\n" {
			break
		}
	}
	line, err := r.ReadString('\n')
	return err == nil && line == "hello\n"
}

// probeProxy uses the attempt's own CONNECT proxy (HTTPS_PROXY): the
// allowed target (the collector's listener on its non-loopback address)
// is reported as allowed-proxy, a sanity check that is no try; a host the
// policy does not list (the listener by its loopback address, any name)
// must be refused.
func (a *agent) probeProxy(t netTargets) {
	p := os.Getenv("HTTPS_PROXY")
	if p == "" {
		return
	}
	a.add("allowed-proxy", t.TCPFar, proxyConnect(p, t.TCPFar), nil)
	a.add("net-proxy-refused", t.TCP, proxyConnect(p, t.TCP), nil)
	a.add("net-proxy-refused", "hostile-agent-e2e.example:443", proxyConnect(p, "hostile-agent-e2e.example:443"), nil)
}

// probeOtherProxies tries the other concurrent attempts' proxies (named
// at the collector's barrier) with the target they allow.
func (a *agent) probeOtherProxies() {
	t, ok := a.askTargets()
	if !ok {
		return
	}
	for _, p := range a.peerProxies {
		a.add("net-other-proxy", p, proxyConnect(p, t.TCPFar), nil)
	}
}
