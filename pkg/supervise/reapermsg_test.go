package supervise

import (
	"bytes"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

func TestSpawnRequestRoundTrip(t *testing.T) {
	req := spawnRequest{path: "/bin/sh", dir: "/tmp", argv: []string{"/bin/sh", "-c", "exit 0"}, env: []string{}}
	b, ok := req.encode("")
	if !ok {
		t.Fatal("encode refused a small request")
	}
	got, err := decodeSpawn(b, nil)
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("decode = %+v, %v; want %+v", got, err, req)
	}
	shared := testShared(t)
	boxed := spawnRequest{path: "/bin/sh", argv: []string{"/bin/sh"}, env: []string{}, program: true, sandbox: &sandbox.Policy{Shared: shared, Rules: []sandbox.Rule{
		{Path: "/usr", Access: sandbox.ReadOnly, Optional: true}, {Path: "/w", Access: sandbox.ReadWrite}, {Path: "/dev/null", Access: sandbox.Device},
	}, Connect: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:4321"), netip.MustParseAddrPort("[::1]:80")}}}
	// The first time with the Shared, then by its key to a reaper that
	// holds it: both decode to the same request, and the second is short.
	full, _ := boxed.encode("")
	got, err = decodeSpawn(full, nil)
	if err != nil || got.sandbox == nil || got.sandbox.Shared.Key() != shared.Key() ||
		!reflect.DeepEqual(got.sandbox.Shared.Rules(), shared.Rules()) || !reflect.DeepEqual(got.sandbox.Shared.Readable(), shared.Readable()) {
		t.Fatalf("decode = %+v, %v; want %+v", got, err, boxed)
	}
	held := got.sandbox.Shared
	got.sandbox.Shared = shared
	if !reflect.DeepEqual(got, boxed) {
		t.Fatalf("decode = %+v; want %+v", got, boxed)
	}
	short, ok := boxed.encode(shared.Key())
	if !ok || len(short) >= len(full) {
		t.Fatalf("by key: %d bytes, %v; with the Shared %d", len(short), ok, len(full))
	}
	if got, err := decodeSpawn(short, held); err != nil || got.sandbox.Shared != held || !reflect.DeepEqual(got.sandbox.Rules, boxed.sandbox.Rules) {
		t.Fatalf("decode by key = %+v, %v", got, err)
	}
	// A reaper holding no Shared, or another, refuses the short form.
	other, err := sandbox.NewShared(shared.Rules(), shared.Readable(), "another stamp")
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]*sandbox.Shared{"none": nil, "another": other} {
		if _, err := decodeSpawn(short, h); err == nil {
			t.Errorf("short form accepted by a reaper holding %s", name)
		}
	}
	// Another Shared travels whole, whatever the reaper holds.
	if b, _ := boxed.encode(other.Key()); !bytes.Equal(b, full) {
		t.Error("a Shared the reaper does not hold was sent by key")
	}
	big := spawnRequest{path: "/x", argv: []string{"/x"}, env: []string{strings.Repeat("A", maxReaperMsg)}}
	if _, ok := big.encode(""); ok {
		t.Fatal("encode accepted a request over maxReaperMsg")
	}
	// Whether a request fits does not depend on the form: the short one
	// of a request too large with its Shared is refused too.
	many := make([]sandbox.Rule, sandbox.MaxRules)
	for i := range many {
		many[i] = sandbox.Rule{Path: "/" + strings.Repeat("p", 300), Access: sandbox.ReadOnly}
	}
	huge, err := sandbox.NewShared(many, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	large := spawnRequest{path: "/x", argv: []string{"/x"}, sandbox: &sandbox.Policy{Shared: huge}}
	if _, ok := large.encode(huge.Key()); ok {
		t.Fatal("the short form of a request over maxReaperMsg was accepted")
	}
}

// testShared is a small Shared with a Readable layer.
func testShared(t testing.TB) *sandbox.Shared {
	s, err := sandbox.NewShared([]sandbox.Rule{{Path: "/etc", Access: sandbox.ReadOnly, Optional: true}, {Path: "/dev/tty", Access: sandbox.Device}},
		[]sandbox.Rule{{Path: "/etc/ssl", Access: sandbox.ReadOnly}}, "1.2.3;")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDecodeSpawnRejects(t *testing.T) {
	good, _ := spawnRequest{path: "/p", argv: []string{"/p"}, env: []string{"A=1"}}.encode("")
	cases := map[string][]byte{
		"empty":              nil,
		"wrong kind":         append([]byte{msgKill}, good[1:]...),
		"trailing byte":      append(append([]byte{}, good...), 0),
		"truncated":          good[:len(good)-1],
		"nul in string":      bytes.Replace(good, []byte("A=1"), []byte("A\x001"), 1),
		"empty path":         mustEncode(t, spawnRequest{argv: []string{"/p"}}),
		"no argv":            mustEncode(t, spawnRequest{path: "/p"}),
		"huge count":         append([]byte{msgSpawn, 2, 0, 0, 0, '/', 'p', 0, 0, 0, 0}, 0xff, 0xff, 0xff, 0xff),
		"no sandbox byte":    good[:len(good)-1],
		"bad sandbox byte":   append(append([]byte{}, good[:len(good)-1]...), 3),
		"bad program byte":   append(append([]byte{}, good[:len(good)-2]...), 2, 0),
		"opened, no sandbox": mustEncode(t, spawnRequest{path: "/p", argv: []string{"/p"}, program: true}),
		"relative rule":      boxedWith(t, sandbox.Rule{Path: "w", Access: sandbox.ReadOnly}),
		"unclean rule":       boxedWith(t, sandbox.Rule{Path: "/w/../x", Access: sandbox.ReadOnly}),
		"bad access":         boxedWith(t, sandbox.Rule{Path: "/w", Access: 9}),
		"no access":          boxedWith(t, sandbox.Rule{Path: "/w"}),
		"bad flags":          bytes.Replace(boxedWith(t, sandbox.Rule{Path: "/w", Access: sandbox.ReadOnly, Optional: true}), []byte{byte(sandbox.ReadOnly), 1}, []byte{byte(sandbox.ReadOnly), 2}, 1),
		"rule count over":    append(append([]byte{}, good[:len(good)-1]...), 1, 0xff, 0xff, 0, 0),
		"bad shared rule":    bytes.Replace(mustEncode(t, spawnRequest{path: "/p", argv: []string{"/p"}, sandbox: &sandbox.Policy{Shared: testShared(t)}}), []byte("/etc/ssl"), []byte("etc/ssl/"), 1),
		"remote connect":     mustEncodeUnchecked(spawnRequest{path: "/p", argv: []string{"/p"}, sandbox: &sandbox.Policy{Connect: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:80")}}}),
		"connect port 0":     mustEncodeUnchecked(spawnRequest{path: "/p", argv: []string{"/p"}, sandbox: &sandbox.Policy{Connect: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}}}),
		"connect garbage":    bytes.Replace(mustEncodeUnchecked(spawnRequest{path: "/p", argv: []string{"/p"}, sandbox: &sandbox.Policy{Connect: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8")}}}), []byte("127.0.0.1:8"), []byte("127.0.0.1:x"), 1),
		"nul in stamp":       bytes.Replace(mustEncode(t, spawnRequest{path: "/p", argv: []string{"/p"}, sandbox: &sandbox.Policy{Shared: testShared(t)}}), []byte("1.2.3;"), []byte("1.2\x003;"), 1),
	}
	for name, b := range cases {
		if _, err := decodeSpawn(b, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// boxedWith encodes a small request whose sandbox holds rule.
func boxedWith(t *testing.T, rule sandbox.Rule) []byte {
	return mustEncode(t, spawnRequest{path: "/p", argv: []string{"/p"}, sandbox: &sandbox.Policy{Rules: []sandbox.Rule{rule}}})
}

// mustEncodeUnchecked encodes r, whose policy need not pass its checks.
func mustEncodeUnchecked(r spawnRequest) []byte {
	b, _ := r.encode("")
	return b
}

func mustEncode(t *testing.T, r spawnRequest) []byte {
	t.Helper()
	b, ok := r.encode("")
	if !ok {
		t.Fatal("encode refused")
	}
	return b
}

func TestReplyRoundTripAndRejects(t *testing.T) {
	for _, r := range []reply{
		{kind: msgStarted, pid: 4242},
		{kind: msgFailed, errno: 2},
		{kind: msgFailed, errno: 1, step: stepSandbox},
		{kind: msgExited, code: 7, fast: true},
		{kind: msgExited, code: -1, signal: 9, term: 2, kill: 1, timedOut: true},
		{kind: msgExited, code: 0, contained: true, held: true},
		{kind: msgExited, code: 0, contained: true, held: true, survivors: true},
		{kind: msgGuarded},
	} {
		got, err := decodeReply(r.encode())
		if err != nil || got != r {
			t.Errorf("round trip of %+v = %+v, %v", r, got, err)
		}
	}
	for name, r := range map[string]reply{
		"zero pid":              {kind: msgStarted},
		"zero errno":            {kind: msgFailed},
		"unknown step":          {kind: msgFailed, errno: 1, step: stepLast + 1},
		"code with signal":      {kind: msgExited, code: 3, signal: 9},
		"negative code":         {kind: msgExited, code: -2},
		"code over 255":         {kind: msgExited, code: 256},
		"signal out of range":   {kind: msgExited, code: -1, signal: 65},
		"unknown kind":          {kind: 'Z'},
		"held uncontained":      {kind: msgExited, held: true},
		"survivors uncontained": {kind: msgExited, survivors: true},
	} {
		if _, err := decodeReply(r.encode()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := decodeReply(append((reply{kind: msgStarted, pid: 1}).encode(), 0)); err == nil {
		t.Error("trailing byte accepted")
	}
}

// FuzzReaperMessages: neither decoder panics, and whatever they accept
// encodes back to the same bytes. The spawn decoder runs as a reaper that
// holds testShared (so short forms naming it decode).
func FuzzReaperMessages(f *testing.F) {
	held := testShared(f)
	seed, _ := spawnRequest{path: "/p", dir: "/d", argv: []string{"/p", "a"}, env: []string{"A=1"}}.encode("")
	f.Add(seed)
	boxed := spawnRequest{path: "/p", argv: []string{"/p"}, program: true, sandbox: &sandbox.Policy{Shared: held, Rules: []sandbox.Rule{{Path: "/w", Access: sandbox.ReadWrite, Optional: true}}}}
	full, _ := boxed.encode("")
	f.Add(full)
	short, _ := boxed.encode(held.Key())
	f.Add(short)
	f.Add((reply{kind: msgExited, code: -1, signal: 15, term: 1}).encode())
	f.Add((reply{kind: msgStarted, pid: 77}).encode())
	f.Add((reply{kind: msgExited, contained: true, held: true}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if req, err := decodeSpawn(b, held); err == nil {
			again, ok := req.encode("")
			if req.sandbox != nil && req.sandbox.Shared == held {
				again, ok = req.encode(held.Key())
			}
			if !ok || !bytes.Equal(again, b) {
				t.Fatalf("spawn %q re-encodes as %q", b, again)
			}
		}
		if r, err := decodeReply(b); err == nil && !bytes.Equal(r.encode(), b) {
			t.Fatalf("reply %q re-encodes as %q", b, r.encode())
		}
	})
}
