package supervise

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

func TestSpawnRequestRoundTrip(t *testing.T) {
	req := spawnRequest{path: "/bin/sh", dir: "/tmp", argv: []string{"/bin/sh", "-c", "exit 0"}, env: []string{}}
	b, ok := req.encode()
	if !ok {
		t.Fatal("encode refused a small request")
	}
	got, err := decodeSpawn(b)
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("decode = %+v, %v; want %+v", got, err, req)
	}
	boxed := spawnRequest{path: "/bin/sh", argv: []string{"/bin/sh"}, env: []string{}, sandbox: &sandbox.Policy{Rules: []sandbox.Rule{
		{Path: "/usr", Access: sandbox.ReadOnly, Optional: true}, {Path: "/w", Access: sandbox.ReadWrite}, {Path: "/dev/null", Access: sandbox.Device},
	}}}
	b, _ = boxed.encode()
	if got, err := decodeSpawn(b); err != nil || !reflect.DeepEqual(got, boxed) {
		t.Fatalf("decode = %+v, %v; want %+v", got, err, boxed)
	}
	big := spawnRequest{path: "/x", argv: []string{"/x"}, env: []string{strings.Repeat("A", maxReaperMsg)}}
	if _, ok := big.encode(); ok {
		t.Fatal("encode accepted a request over maxReaperMsg")
	}
}

func TestDecodeSpawnRejects(t *testing.T) {
	good, _ := spawnRequest{path: "/p", argv: []string{"/p"}, env: []string{"A=1"}}.encode()
	cases := map[string][]byte{
		"empty":            nil,
		"wrong kind":       append([]byte{msgKill}, good[1:]...),
		"trailing byte":    append(append([]byte{}, good...), 0),
		"truncated":        good[:len(good)-1],
		"nul in string":    bytes.Replace(good, []byte("A=1"), []byte("A\x001"), 1),
		"empty path":       mustEncode(t, spawnRequest{argv: []string{"/p"}}),
		"no argv":          mustEncode(t, spawnRequest{path: "/p"}),
		"huge count":       append([]byte{msgSpawn, 2, 0, 0, 0, '/', 'p', 0, 0, 0, 0}, 0xff, 0xff, 0xff, 0xff),
		"no sandbox byte":  good[:len(good)-1],
		"bad sandbox byte": append(append([]byte{}, good[:len(good)-1]...), 2),
		"relative rule":    boxedWith(t, sandbox.Rule{Path: "w", Access: sandbox.ReadOnly}),
		"unclean rule":     boxedWith(t, sandbox.Rule{Path: "/w/../x", Access: sandbox.ReadOnly}),
		"bad access":       boxedWith(t, sandbox.Rule{Path: "/w", Access: 9}),
		"no access":        boxedWith(t, sandbox.Rule{Path: "/w"}),
		"bad flags":        bytes.Replace(boxedWith(t, sandbox.Rule{Path: "/w", Access: sandbox.ReadOnly, Optional: true}), []byte{byte(sandbox.ReadOnly), 1}, []byte{byte(sandbox.ReadOnly), 2}, 1),
		"rule count over":  append(append([]byte{}, good[:len(good)-1]...), 1, 0xff, 0xff, 0, 0),
	}
	for name, b := range cases {
		if _, err := decodeSpawn(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// boxedWith encodes a small request whose sandbox holds rule.
func boxedWith(t *testing.T, rule sandbox.Rule) []byte {
	return mustEncode(t, spawnRequest{path: "/p", argv: []string{"/p"}, sandbox: &sandbox.Policy{Rules: []sandbox.Rule{rule}}})
}

func mustEncode(t *testing.T, r spawnRequest) []byte {
	t.Helper()
	b, ok := r.encode()
	if !ok {
		t.Fatal("encode refused")
	}
	return b
}

func TestReplyRoundTripAndRejects(t *testing.T) {
	for _, r := range []reply{
		{kind: msgStarted, pid: 4242},
		{kind: msgFailed, errno: 2},
		{kind: msgExited, code: 7, fast: true},
		{kind: msgExited, code: -1, signal: 9, term: 2, kill: 1, timedOut: true},
	} {
		got, err := decodeReply(r.encode())
		if err != nil || got != r {
			t.Errorf("round trip of %+v = %+v, %v", r, got, err)
		}
	}
	for name, r := range map[string]reply{
		"zero pid":            {kind: msgStarted},
		"zero errno":          {kind: msgFailed},
		"code with signal":    {kind: msgExited, code: 3, signal: 9},
		"negative code":       {kind: msgExited, code: -2},
		"code over 255":       {kind: msgExited, code: 256},
		"signal out of range": {kind: msgExited, code: -1, signal: 65},
		"unknown kind":        {kind: 'Z'},
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
// encodes back to the same bytes.
func FuzzReaperMessages(f *testing.F) {
	seed, _ := spawnRequest{path: "/p", dir: "/d", argv: []string{"/p", "a"}, env: []string{"A=1"}}.encode()
	f.Add(seed)
	boxed, _ := spawnRequest{path: "/p", argv: []string{"/p"}, sandbox: &sandbox.Policy{Rules: []sandbox.Rule{{Path: "/w", Access: sandbox.ReadWrite, Optional: true}}}}.encode()
	f.Add(boxed)
	f.Add((reply{kind: msgExited, code: -1, signal: 15, term: 1}).encode())
	f.Add((reply{kind: msgStarted, pid: 77}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if req, err := decodeSpawn(b); err == nil {
			again, ok := req.encode()
			if !ok || !bytes.Equal(again, b) {
				t.Fatalf("spawn %q re-encodes as %q", b, again)
			}
		}
		if r, err := decodeReply(b); err == nil && !bytes.Equal(r.encode(), b) {
			t.Fatalf("reply %q re-encodes as %q", b, r.encode())
		}
	})
}
