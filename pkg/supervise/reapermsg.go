package supervise

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// The messages between supervise and a long-lived reaper. They travel as
// datagrams on a SOCK_SEQPACKET socket pair, one message per datagram; the
// first byte says what the message is. Both ends are the same binary (see
// Command.Reaper), so the format is private and carries no version.
//
//	to the reaper:   'S' spawn (with 3 fds: stdin, stdout, stderr; then
//	                     the program's file when it comes opened; then,
//	                     for a contained sandboxed program, its cgroup,
//	                     the reaper's own cgroup, stdout's read end),
//	                 'T' terminate the program's group, 'K' kill it,
//	                 'G' guard yourself (once, before any spawn),
//	                 'Y' go: start the contained program just sent
//	from the reaper: 'P' started (pid), 'F' start or guard failed (errno,
//	                     then the step that failed: stepExec…),
//	                 'X' the program was reaped and its descendants swept
//	                     (or, contained, its cgroup emptied),
//	                 'L' guarded (with 1 fd: the metadata filter's listener)
const (
	msgSpawn     = 'S'
	msgTerminate = 'T'
	msgKill      = 'K'
	msgGuard     = 'G'
	msgGo        = 'Y'
	msgStarted   = 'P'
	msgFailed    = 'F'
	msgExited    = 'X'
	msgGuarded   = 'L'
)

// maxReaperMsg bounds one message. It stays below the default socket send
// buffer (net.core.wmem_default), above which a datagram cannot be sent.
const maxReaperMsg = 192 << 10

// spawnLimits bound a spawn request's parts.
const (
	maxSpawnStrings = 8192 // argv and env entries together
)

var errReaperMsg = errors.New("malformed reaper message")

// spawnRequest is what the reaper needs to start a program.
type spawnRequest struct {
	path string
	dir  string
	argv []string
	env  []string
	// sandbox, when set, is the Landlock policy the program starts in.
	sandbox *sandbox.Policy
	// program: the program's file comes as a descriptor after the three
	// standard ones (Command.Program); path is then only its name.
	program bool
}

// encode returns the request as one 'S' message, or false when it does not
// fit in maxReaperMsg with its sandbox.Shared (whichever form it takes, so
// that a request fits or not whatever the reaper holds). held is the Key
// of the Shared the reaper already holds (the last one it was sent, ""
// for none): a policy whose Shared is that one refers to it by its key
// instead of carrying it again.
//
// After the paths, arguments and environment comes one byte: 1 when the
// program's file comes as a descriptor (see program), else 0. Then one
// byte: 0 for no
// sandbox; 1 for a policy with its Shared (its rules, its Readable rules
// and its stamp), which the reaper then holds; 2 for a policy whose Shared the
// reaper holds (the Shared's key). The policy's own rules follow, then
// its Connect endpoints.
func (r spawnRequest) encode(held string) ([]byte, bool) {
	b := []byte{msgSpawn}
	b = appendString(b, r.path)
	b = appendString(b, r.dir)
	b = appendStrings(b, r.argv)
	b = appendStrings(b, r.env)
	b = append(b, boolByte(r.program))
	switch {
	case r.sandbox == nil:
		b = append(b, 0)
	case held != "" && r.sandbox.Shared.Key() == held:
		b = append(b, 2)
		b = append(b, held...)
		b = appendRules(b, r.sandbox.Rules)
		b = appendConnect(b, r.sandbox.Connect)
		return b, len(b)-len(held)+sharedBytes(r.sandbox.Shared) <= maxReaperMsg
	default:
		b = append(b, 1)
		b = appendRules(b, r.sandbox.Shared.Rules())
		b = appendRules(b, r.sandbox.Shared.Readable())
		b = appendString(b, r.sandbox.Shared.Stamp())
		b = appendRules(b, r.sandbox.Rules)
		b = appendConnect(b, r.sandbox.Connect)
	}
	return b, len(b) <= maxReaperMsg
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// sharedBytes is what a Shared adds to a spawn message (see encode).
func sharedBytes(s *sandbox.Shared) int {
	n := 4 + len(s.Stamp())
	for _, list := range [][]sandbox.Rule{s.Rules(), s.Readable()} {
		n += 4
		for _, rule := range list {
			n += 6 + len(rule.Path)
		}
	}
	return n
}

// appendRules appends a rule count, then per rule its access, a flags
// byte (1: optional) and its path.
func appendRules(b []byte, rules []sandbox.Rule) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(rules)))
	for _, rule := range rules {
		flags := byte(0)
		if rule.Optional {
			flags = 1
		}
		b = append(b, byte(rule.Access), flags)
		b = appendString(b, rule.Path)
	}
	return b
}

// appendConnect appends an endpoint count, then each endpoint as text.
func appendConnect(b []byte, eps []netip.AddrPort) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(eps)))
	for _, ep := range eps {
		b = appendString(b, ep.String())
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// decodeSpawn parses an 'S' message. Strings may not contain NUL (exec
// could not pass them), the path must not be empty, argv must have at
// least the program name, a sandbox policy's rules must pass their checks
// (and one that refers to a Shared must name held, the one the reaper
// holds), and nothing may follow the last field.
func decodeSpawn(b []byte, held *sandbox.Shared) (spawnRequest, error) {
	if len(b) == 0 || b[0] != msgSpawn || len(b) > maxReaperMsg {
		return spawnRequest{}, errReaperMsg
	}
	d := msgDecoder{b: b[1:]}
	var r spawnRequest
	r.path = d.str()
	r.dir = d.str()
	r.argv = d.strs()
	r.env = d.strs()
	switch d.byte() {
	case 0:
	case 1:
		r.program = true
	default:
		d.bad = true
	}
	switch d.byte() {
	case 0:
	case 1:
		rules, readable := d.rules(), d.rules()
		shared, err := sandbox.NewShared(rules, readable, d.str())
		if err != nil {
			d.bad = true
		}
		r.sandbox = d.policy(shared)
	case 2:
		if held == nil || len(d.b) < sandbox.KeyBytes || string(d.b[:sandbox.KeyBytes]) != held.Key() {
			d.bad = true
			break
		}
		d.b = d.b[sandbox.KeyBytes:]
		r.sandbox = d.policy(held)
	default:
		d.bad = true
	}
	// Only a sandboxed program comes as a descriptor (see Command.Program).
	if d.bad || len(d.b) != 0 || r.path == "" || len(r.argv) == 0 || r.program && r.sandbox == nil {
		return spawnRequest{}, errReaperMsg
	}
	return r, nil
}

// policy reads a policy's own rules (see appendRules); shared is its
// Shared.
func (d *msgDecoder) policy(shared *sandbox.Shared) *sandbox.Policy {
	p := &sandbox.Policy{Shared: shared, Rules: d.rules(), Connect: d.connect()}
	if d.bad || p.Check() != nil {
		d.bad = true
		return nil
	}
	return p
}

// connect reads a policy's Connect endpoints (see appendConnect).
func (d *msgDecoder) connect() []netip.AddrPort {
	n := d.u32()
	if d.bad || n > sandbox.MaxConnect {
		d.bad = true
		return nil
	}
	var out []netip.AddrPort
	for i := uint32(0); i < n && !d.bad; i++ {
		ep, err := netip.ParseAddrPort(d.str())
		if err != nil {
			d.bad = true
		}
		out = append(out, ep)
	}
	return out
}

// rules reads one list of rules.
func (d *msgDecoder) rules() []sandbox.Rule {
	n := d.u32()
	// Every rule takes at least 6 bytes.
	if d.bad || n > sandbox.MaxRules || uint64(n)*6 > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	var out []sandbox.Rule
	for i := uint32(0); i < n && !d.bad; i++ {
		access, flags := d.byte(), d.byte()
		if flags > 1 {
			d.bad = true
		}
		out = append(out, sandbox.Rule{Access: sandbox.Access(access), Optional: flags == 1, Path: d.str()})
	}
	return out
}

// msgDecoder reads length-prefixed fields; bad is set, and stays set, at
// the first field that does not fit.
type msgDecoder struct {
	b     []byte
	count int
	bad   bool
}

func (d *msgDecoder) u32() uint32 {
	if d.bad || len(d.b) < 4 {
		d.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *msgDecoder) byte() byte {
	if d.bad || len(d.b) < 1 {
		d.bad = true
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *msgDecoder) str() string {
	n := d.u32()
	if d.bad || uint64(n) > uint64(len(d.b)) {
		d.bad = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			d.bad = true
			return ""
		}
	}
	return s
}

func (d *msgDecoder) strs() []string {
	n := d.u32()
	// Every string takes at least its 4-byte length.
	if d.bad || uint64(n)*4 > uint64(len(d.b)) || d.count+int(n) > maxSpawnStrings {
		d.bad = true
		return nil
	}
	d.count += int(n)
	out := make([]string, 0, n)
	for i := uint32(0); i < n && !d.bad; i++ {
		out = append(out, d.str())
	}
	return out
}

// reply is one message from the reaper.
type reply struct {
	kind   byte
	pid    int  // msgStarted
	errno  int  // msgFailed
	step   byte // msgFailed: the step of the start that failed (stepExec…)
	code   int  // msgExited: exit code, or -1 when a signal ended it
	signal int  // msgExited: the signal, or 0
	// msgExited: what the sweep did (see sweepReport).
	fast, timedOut             bool
	term, kill                 int
	contained, held, survivors bool
}

// Steps of a start, named by a failed message so that the Worker's
// record says which one the system refused (an errno alone does not).
const (
	stepExec    = iota // the fork and exec, or a request that is no start
	stepCgroup         // the reaper's move into or out of the program's cgroup
	stepProgram        // opening the program's file
	stepSandbox        // the thread's sandbox (Landlock, capabilities) or an unguarded reaper
	stepLast    = stepSandbox
)

// stepNames are the steps as StartError reasons.
var stepNames = [...]string{stepExec: "spawn", stepCgroup: "enter cgroup", stepProgram: "open program", stepSandbox: "restrict thread"}

// Flag bits of an exited message.
const (
	flagTimedOut = 1 << iota
	flagFast
	flagContained
	flagHeld
	flagSurvivors
	flagsAll = flagTimedOut | flagFast | flagContained | flagHeld | flagSurvivors
)

func (r reply) encode() []byte {
	b := []byte{r.kind}
	switch r.kind {
	case msgStarted:
		b = binary.LittleEndian.AppendUint32(b, uint32(r.pid))
	case msgFailed:
		b = binary.LittleEndian.AppendUint32(b, uint32(r.errno))
		b = append(b, r.step)
	case msgExited:
		b = binary.LittleEndian.AppendUint32(b, uint32(int32(r.code)))
		b = binary.LittleEndian.AppendUint32(b, uint32(r.signal))
		flags := byte(0)
		if r.timedOut {
			flags |= flagTimedOut
		}
		if r.fast {
			flags |= flagFast
		}
		if r.contained {
			flags |= flagContained
		}
		if r.held {
			flags |= flagHeld
		}
		if r.survivors {
			flags |= flagSurvivors
		}
		b = append(b, flags)
		b = binary.LittleEndian.AppendUint32(b, uint32(r.term))
		b = binary.LittleEndian.AppendUint32(b, uint32(r.kill))
	}
	return b
}

// decodeReply parses a reaper's message strictly: known kind, exact
// length, values in range.
func decodeReply(b []byte) (reply, error) {
	if len(b) == 0 {
		return reply{}, errReaperMsg
	}
	r := reply{kind: b[0]}
	d := msgDecoder{b: b[1:]}
	switch r.kind {
	case msgStarted:
		r.pid = int(d.u32())
		if r.pid <= 0 || r.pid > 1<<22 { // PID_MAX_LIMIT
			d.bad = true
		}
	case msgFailed:
		r.errno = int(d.u32())
		r.step = d.byte()
		if r.errno <= 0 || r.errno > 4095 || r.step > stepLast {
			d.bad = true
		}
	case msgExited:
		r.code = int(int32(d.u32()))
		r.signal = int(d.u32())
		flags := d.byte()
		r.timedOut, r.fast = flags&flagTimedOut != 0, flags&flagFast != 0
		r.contained, r.held, r.survivors = flags&flagContained != 0, flags&flagHeld != 0, flags&flagSurvivors != 0
		r.term, r.kill = int(d.u32()), int(d.u32())
		// Only a contained program has these to report.
		if flags&^flagsAll != 0 || !r.contained && (r.held || r.survivors) || r.term > maxSwept || r.kill > maxSwept ||
			r.signal == 0 && (r.code < 0 || r.code > 255) || r.signal != 0 && (r.code != -1 || r.signal > 64) {
			d.bad = true
		}
	case msgGuarded: // nothing but the descriptor that comes with it
	default:
		d.bad = true
	}
	if d.bad || len(d.b) != 0 {
		return reply{}, errReaperMsg
	}
	return r, nil
}

// maxSwept bounds the signal counts of a sweep report (PID_MAX_LIMIT).
const maxSwept = 1 << 22
