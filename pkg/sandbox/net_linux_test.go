//go:build linux && (amd64 || arm64)

package sandbox_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// netProbeEnv makes the test binary try the network (netProbe) and print
// one name=outcome line per try. NETPROBE_ALLOWED, NETPROBE_OTHER and
// NETPROBE_HOST are host:port listeners of the test: the one endpoint
// allowed, another loopback port, and a non-loopback address of this host
// on the allowed port.
const netProbeEnv = "FORGE_SANDBOX_NETPROBE"

func init() { testModes[netProbeEnv] = netProbe }

func netProbe() {
	allowed := netip.MustParseAddrPort(os.Getenv("NETPROBE_ALLOWED"))
	other := netip.MustParseAddrPort(os.Getenv("NETPROBE_OTHER"))
	say := func(name string, err error) {
		if err == nil {
			fmt.Printf("%s=ok\n", name)
		} else {
			fmt.Printf("%s=%v\n", name, errnoName(err))
		}
	}
	dialFlags := func(ep netip.AddrPort, flags int) error {
		fam := syscall.AF_INET
		if ep.Addr().Is6() {
			fam = syscall.AF_INET6
		}
		fd, err := syscall.Socket(fam, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|flags, 0)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		return syscall.Connect(fd, sockaddr(ep))
	}
	dial := func(ep netip.AddrPort) error { return dialFlags(ep, 0) }
	say("allowed", dial(allowed))
	say("allowed-mapped", dial(netip.AddrPortFrom(netip.AddrFrom16(allowed.Addr().As16()), allowed.Port())))
	say("other-port", dial(other))
	say("other-loopback-address", dial(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), allowed.Port())))
	say("any-address", dial(netip.AddrPortFrom(netip.MustParseAddr("0.0.0.0"), allowed.Port())))
	// Non-blocking: unsandboxed it would wait for an answer that never comes.
	say("remote", dialFlags(netip.MustParseAddrPort("192.0.2.77:443"), syscall.SOCK_NONBLOCK))
	if h := os.Getenv("NETPROBE_HOST"); h != "" {
		say("host-address", dial(netip.MustParseAddrPort(h)))
	}
	_, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	say("udp", err)
	_, err = syscall.Socket(syscall.AF_INET6, syscall.SOCK_DGRAM, 0)
	say("udp6", err)
	_, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP)
	say("raw", err)
	_, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 132) // SCTP
	say("sctp", err)
	_, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 262) // MPTCP
	say("mptcp", err)
	_, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
	say("packet", err)
	_, err = syscall.Socket(40, syscall.SOCK_STREAM, 0) // AF_VSOCK
	say("vsock", err)
	_, err = syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW, 0)
	say("netlink-route", err)
	_, err = syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW, 9) // NETLINK_AUDIT
	say("netlink-audit", err)
	_, err = syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	say("unix", err)
	_, err = syscall.Socketpair(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	say("socketpair-inet", err)
	_, err = syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	say("socketpair-unix", err)
	// TCP Fast Open: a send that connects, to the other port.
	fd, _ := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	say("fastopen", syscall.Sendto(fd, []byte("x"), 0x20000000, sockaddr(other)))
	say("fastopen-sendmsg", syscall.Sendmsg(fd, []byte("x"), nil, sockaddr(other), 0x20000000))
	syscall.Close(fd)
	fd, _ = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	say("bind", syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	dev, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, 62) // SO_BINDTOIFINDEX
	fmt.Printf("device-bound=%t\n", err == nil && dev != 0)
	say("unbind-device", syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, 62, 0))
	syscall.Close(fd)
	race(allowed, other)
}

// race connects to the allowed endpoint again and again while another
// thread rewrites the address between that and the other port: the
// guard connects to what it read, so the other listener never sees one.
func race(allowed, other netip.AddrPort) {
	var sa [16]byte
	binary.NativeEndian.PutUint16(sa[0:], syscall.AF_INET)
	binary.BigEndian.PutUint16(sa[2:], allowed.Port())
	a4 := allowed.Addr().As4()
	copy(sa[4:], a4[:])
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		good, bad := portBytes(allowed.Port()), portBytes(other.Port())
		for i := 0; !stop.Load(); i++ {
			if i%2 == 0 {
				atomic.StoreUint32((*uint32)(unsafe.Pointer(&sa[0])), uint32(syscall.AF_INET)|uint32(bad)<<16)
			} else {
				atomic.StoreUint32((*uint32)(unsafe.Pointer(&sa[0])), uint32(syscall.AF_INET)|uint32(good)<<16)
			}
		}
	}()
	ok, refused := 0, 0
	for range 400 {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			continue
		}
		_, _, e := syscall.Syscall(syscall.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa[0])), 16)
		if e == 0 {
			ok++
		} else {
			refused++
		}
		syscall.Close(fd)
	}
	stop.Store(true)
	<-done
	fmt.Printf("race=%d/%d\n", ok, refused)
}

// portBytes is port as it lies in memory in network order, read as a
// native uint16.
func portBytes(port uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], port)
	return binary.NativeEndian.Uint16(b[:])
}

func sockaddr(ep netip.AddrPort) syscall.Sockaddr {
	if ep.Addr().Is4() {
		return &syscall.SockaddrInet4{Port: int(ep.Port()), Addr: ep.Addr().As4()}
	}
	return &syscall.SockaddrInet6{Port: int(ep.Port()), Addr: ep.Addr().As16()}
}

func errnoName(err error) string {
	if e, ok := err.(syscall.Errno); ok {
		switch e {
		case syscall.EACCES:
			return "EACCES"
		case syscall.EOPNOTSUPP:
			return "EOPNOTSUPP"
		case syscall.EPERM:
			return "EPERM"
		case syscall.EINPROGRESS:
			return "EINPROGRESS"
		case syscall.ECONNREFUSED:
			return "ECONNREFUSED"
		}
	}
	return err.Error()
}

// counter accepts connections on ln and counts them.
func counter(t *testing.T, network, addr string) (netip.AddrPort, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String()), &n
}

// hostAddress is a non-loopback IPv4 address of this host, if it has one.
func hostAddress() (netip.Addr, bool) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// A sandboxed program reaches the one endpoint its policy names and
// nothing else: not another loopback port, another loopback address,
// this host's other address on the same port, a remote address, UDP (so
// no DNS), other socket families, TCP Fast Open, a bind; its TCP sockets
// stay bound to the loopback device; a thread rewriting the address of a
// connect in flight never reaches the other port. The refused
// destinations are counted. Unsandboxed the same probes reach.
func TestSandboxNetwork(t *testing.T) {
	allowed, allowedN := counter(t, "tcp4", "127.0.0.1:0")
	other, otherN := counter(t, "tcp4", "127.0.0.1:0")
	env := []string{netProbeEnv + "=1", "NETPROBE_ALLOWED=" + allowed.String(), "NETPROBE_OTHER=" + other.String()}
	var hostN *atomic.Int64
	if h, ok := hostAddress(); ok {
		var ep netip.AddrPort
		ep, hostN = counter(t, "tcp4", netip.AddrPortFrom(h, allowed.Port()).String())
		env = append(env, "NETPROBE_HOST="+ep.String())
	}
	refusals := &sandbox.Refusals{}
	p := &sandbox.Policy{Rules: []sandbox.Rule{{Path: "/", Access: sandbox.ReadOnly}}, Connect: []netip.AddrPort{allowed}, Refusals: refusals}
	out := fromLockedThreadAs(t, func() (func(), error) {
		if _, err := sandbox.RestrictThread(p, nil); err != nil {
			return nil, err
		}
		g, err := guardThread(p)
		if err != nil {
			return nil, err
		}
		return g.Close, nil
	}, os.Args[0], []string{os.Args[0]}, env)
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	want := map[string]string{
		"allowed": "ok", "allowed-mapped": "ok", "other-port": "EACCES", "other-loopback-address": "EACCES",
		"any-address": "EACCES", "remote": "EACCES", "udp": "EACCES", "udp6": "EACCES", "raw": "EACCES",
		"sctp": "EACCES", "mptcp": "EACCES", "packet": "EACCES", "vsock": "EACCES", "netlink-route": "ok",
		"netlink-audit": "EACCES", "unix": "ok", "socketpair-inet": "EACCES", "socketpair-unix": "ok",
		"fastopen": "EOPNOTSUPP", "fastopen-sendmsg": "EOPNOTSUPP", "bind": "EACCES", "device-bound": "true",
		"unbind-device": "EPERM",
	}
	if hostN != nil {
		want["host-address"] = "EACCES"
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	var ok, refused int
	if _, err := fmt.Sscanf(got["race"], "%d/%d", &ok, &refused); err != nil || ok == 0 || refused == 0 {
		t.Errorf("race: %q: both outcomes must occur", got["race"])
	}
	if n := otherN.Load(); n != 0 {
		t.Errorf("the other port accepted %d connections", n)
	}
	if hostN != nil && hostN.Load() != 0 {
		t.Errorf("the host's other address accepted %d connections", hostN.Load())
	}
	if allowedN.Load() == 0 {
		t.Error("the allowed endpoint saw no connection")
	}
	count, kept := refusals.Snapshot()
	if count < int64(refused)+5 {
		t.Errorf("refusals counted %d, want at least %d", count, refused+5)
	}
	hosts := map[string]bool{}
	for _, r := range kept {
		hosts[fmt.Sprintf("%s:%d", r.Host, r.Port)] = true
	}
	for _, h := range []string{other.String(), "192.0.2.77:443", "127.0.0.2:" + fmt.Sprint(allowed.Port())} {
		if !hosts[h] {
			t.Errorf("refusal of %s not kept (%v)", h, kept)
		}
	}

	// Unsandboxed, the same program reaches the other port.
	before := otherN.Load()
	out = fromLockedThreadAs(t, func() (func(), error) { return func() {}, nil }, os.Args[0], []string{os.Args[0]}, env)
	if !strings.Contains(out, "other-port=ok") || !strings.Contains(out, "udp=ok") || !strings.Contains(out, "bind=ok") {
		t.Errorf("unsandboxed probes did not reach:\n%s", out)
	}
	if otherN.Load() == before {
		t.Error("unsandboxed, the other port saw no connection")
	}
}

// fromLockedThreadAs is fromLockedThread, the program running as the
// unprivileged account when the test runs as root (root may change a
// socket's device binding).
func fromLockedThreadAs(t *testing.T, setup func() (func(), error), path string, argv, env []string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return fromLockedThread(t, setup, path, argv, env)
	}
	dir, err := os.MkdirTemp("", "sandbox-net-") // the test binary, where the other account can run it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "probe")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return fromLockedThread(t, func() (func(), error) {
		// Only this locked thread, which ends with the call; first, as
		// the sandbox leaves it no capability to change its account.
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, unprivileged, unprivileged, unprivileged); e != 0 {
			return nil, e
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, unprivileged, unprivileged, unprivileged); e != 0 {
			return nil, e
		}
		return setup()
	}, path, argv, env)
}

// FuzzDecodeSockaddr: any bytes decode without a panic, and an address
// decoded as IP is one the kernel would take as such.
func FuzzDecodeSockaddr(f *testing.F) {
	v4 := make([]byte, 16)
	binary.NativeEndian.PutUint16(v4, syscall.AF_INET)
	binary.BigEndian.PutUint16(v4[2:], 8080)
	copy(v4[4:], []byte{127, 0, 0, 1})
	v6 := make([]byte, 28)
	binary.NativeEndian.PutUint16(v6, syscall.AF_INET6)
	v6[23] = 1
	f.Add(v4)
	f.Add(v6)
	f.Add([]byte{1, 0, '/', 't'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ep, inet, ok := sandbox.DecodeSockaddr(b)
		if ok && !inet {
			t.Fatal("ok without an IP family")
		}
		if !ok && ep.IsValid() {
			t.Fatal("an address from a short sockaddr")
		}
		if ok {
			fam := binary.NativeEndian.Uint16(b)
			if fam == syscall.AF_INET && (len(b) < 16 || !ep.Addr().Is4()) || fam == syscall.AF_INET6 && (len(b) < 24 || !ep.Addr().Is6()) {
				t.Fatalf("decoded %v from family %d, %d bytes", ep, fam, len(b))
			}
			if binary.BigEndian.Uint16(b[2:]) != ep.Port() {
				t.Fatal("port")
			}
		}
	})
}

// BenchmarkConnect is one TCP socket, connect and close to a loopback
// listener from a guarded thread (the guard makes the socket, bound to
// lo, and the connect: two round trips) and from a plain one. Blocking
// connects from a Go thread are restarted by its preemption signal: the
// guarded run failed with EISCONN until the guard answered a restarted
// connect.
func BenchmarkConnect(b *testing.B) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ep := netip.MustParseAddrPort(ln.Addr().String())
	for _, guarded := range []bool{false, true} {
		name := "direct"
		if guarded {
			name = "guarded"
		}
		b.Run(name, func(b *testing.B) {
			errs := make(chan error, 1)
			start := make(chan *sandbox.Guard, 1)
			go func() {
				runtime.LockOSThread() // never unlocked: a filtered thread ends with the goroutine
				var g *sandbox.Guard
				if guarded {
					var err error
					if g, err = guardThread(&sandbox.Policy{Connect: []netip.AddrPort{ep}}); err != nil {
						errs <- err
						return
					}
				}
				start <- g
				sa := sockaddr(ep)
				for range b.N {
					// Not syscall.Socket: a raw system call waiting for a
					// guard in its own process would hold up the runtime
					// (a stop of the world), and the guard with it.
					r, _, e := syscall.Syscall(syscall.SYS_SOCKET, syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
					var err error
					if e != 0 {
						err = e
					} else {
						err = syscall.Connect(int(r), sa)
						syscall.Close(int(r))
					}
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
			g := <-start
			b.ResetTimer()
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			if g != nil {
				g.Close()
			}
		})
	}
}
