package conformance

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

const testID = "0123456789abcdef0123456789abcdef"

func testRequest(op plugin.Operation, offer []plugin.Capability) *Request {
	if offer == nil {
		offer = DefaultOffer(op)
	}
	return &Request{ID: testID, Operation: op, Offer: offer,
		Workspace: "/srv/conformance/workspace", Instruction: instruction, TimeoutMS: 60000}
}

func TestScenarioTableShape(t *testing.T) {
	for _, op := range []plugin.Operation{plugin.OpText, plugin.OpWorkspaceEdit} {
		t.Run(string(op), func(t *testing.T) {
			all := Scenarios(op)
			if len(all) < 40 {
				t.Fatalf("%d scenarios, want at least 40", len(all))
			}
			names := map[string]bool{}
			classes := map[string]int{}
			known := map[string]bool{}
			for _, c := range Classes() {
				known[c] = true
			}
			for _, sc := range all {
				if names[sc.Name] {
					t.Errorf("duplicate scenario name %q", sc.Name)
				}
				names[sc.Name] = true
				if !known[sc.Class] {
					t.Errorf("%s: unknown class %q", sc.Name, sc.Class)
				}
				if !strings.HasPrefix(sc.Name, sc.Class+"-") {
					t.Errorf("%s: name does not start with its class %q", sc.Name, sc.Class)
				}
				if sc.Bytes == nil {
					t.Errorf("%s: no bytes", sc.Name)
				}
				classes[sc.Class]++
			}
			for _, c := range Classes() {
				if classes[c] == 0 {
					t.Errorf("class %q has no scenario", c)
				}
			}
			if all[0].Name != "session-valid" {
				t.Errorf("first scenario is %q, want session-valid (it records the reference initialized frame)", all[0].Name)
			}
		})
	}
}

func TestBaseFramesAreCanonical(t *testing.T) {
	for _, op := range []plugin.Operation{plugin.OpText, plugin.OpWorkspaceEdit} {
		r := testRequest(op, nil)
		init, err := plugin.Encode(plugin.Frame{ID: testID, Type: plugin.TypeInitialize,
			Capabilities: r.Offer, Limits: plugin.V1Limits()})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.initialize().line(); got != string(init) {
			t.Errorf("%s initialize:\n got %s\nwant %s", op, got, init)
		}
		want := plugin.Frame{ID: testID, Type: plugin.TypeExecute, Operation: op, Input: textInput}
		if op == plugin.OpWorkspaceEdit {
			want = plugin.Frame{ID: testID, Type: plugin.TypeExecute, Operation: op,
				Workspace: r.Workspace, Instruction: r.Instruction, TimeoutMS: r.TimeoutMS}
		}
		exec, err := plugin.Encode(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.execute().line(); got != string(exec) {
			t.Errorf("%s execute:\n got %s\nwant %s", op, got, exec)
		}
	}
}

// workerFrames reads the frames a plugin would read from data, with the
// protocol's reader and decoder, feeding them to sess. It returns how many
// of the want frames were accepted and the first rejection
// (io.ErrUnexpectedEOF when the input ends early).
func workerFrames(sess *plugin.Session, data string, want int) (int, error) {
	in := bufio.NewReader(strings.NewReader(data))
	for n := 0; n < want; n++ {
		line, err := plugin.ReadFrame(in)
		if errors.Is(err, io.EOF) {
			return n, io.ErrUnexpectedEOF
		}
		if err != nil {
			return n, err
		}
		f, err := plugin.DecodeFrame(line)
		if err != nil {
			return n, err
		}
		if !f.Type.FromWorker() {
			return n, errors.New("plugin frame type from the worker")
		}
		if err := sess.Accept(f); err != nil {
			return n, err
		}
	}
	return want, nil
}

// TestScenariosAgreeWithProtocol replays every scenario's bytes against
// pkg/plugin's own rules, as a plugin supporting just the mode's operation
// and every optional capability would see them: invalid scenarios must be
// rejected exactly where they claim, valid ones accepted in full.
func TestScenariosAgreeWithProtocol(t *testing.T) {
	for _, op := range []plugin.Operation{plugin.OpText, plugin.OpWorkspaceEdit} {
		supported := []plugin.Capability{op.Capability(), plugin.CapProgress, plugin.CapCancel,
			plugin.CapCommitSubject, plugin.CapAgentReport}
		for _, sc := range Scenarios(op) {
			t.Run(string(op)+"/"+sc.Name, func(t *testing.T) {
				r := testRequest(op, sc.Offer)
				sess, err := plugin.NewSession(testID)
				if err != nil {
					t.Fatal(err)
				}
				data := sc.Bytes(r)
				if sc.Expect == ExpectSilentExit {
					if _, err := workerFrames(sess, data, 1); err == nil {
						t.Fatal("the first frame is valid, but the scenario claims an invalid initialization")
					}
					return
				}
				if _, err := workerFrames(sess, r.initialize().line(), 1); err != nil {
					t.Fatalf("initialize: %v", err)
				}
				sel, ok := plugin.Select(r.Offer, supported)
				if !ok {
					t.Fatal("no operation selected")
				}
				if err := sess.Accept(plugin.Frame{ID: testID, Type: plugin.TypeInitialized, Capabilities: sel}); err != nil {
					t.Fatalf("initialized: %v", err)
				}
				frames := strings.Count(data, "\n")
				switch sc.Expect {
				case ExpectInitializedExit:
					if _, err := workerFrames(sess, data, frames+1); err == nil {
						t.Fatal("every frame is valid, but the scenario claims an invalid execution")
					} else if sess.Executing() {
						t.Fatalf("a valid execute came before the violation (%v)", err)
					}
				case ExpectLateReject:
					n, err := workerFrames(sess, data, frames)
					if err == nil || n == 0 || !sess.Executing() {
						t.Fatalf("want a valid execute then a violation, got %d valid frames (%v)", n, err)
					}
				case ExpectSession, ExpectHostRun:
					if n, err := workerFrames(sess, data, frames); err != nil {
						t.Fatalf("frame %d of a valid session is invalid: %v", n+1, err)
					}
					if !sess.Executing() {
						t.Fatal("session did not reach execution")
					}
				}
			})
		}
	}
}

func TestResultLine(t *testing.T) {
	cases := []struct {
		r    Result
		want string
	}{
		{Result{Name: "a"}, "PASS a"},
		{Result{Name: "a", Note: "not applicable: x"}, "PASS a (not applicable: x)"},
		{Result{Name: "a", Err: errors.New("boom")}, "FAIL a: boom"},
	}
	for _, c := range cases {
		if got := c.r.Line(); got != c.want {
			t.Errorf("Line() = %q, want %q", got, c.want)
		}
	}
	long := Result{Name: "b", Err: errors.New(strings.Repeat("é", 1000))}.Line()
	if len(long) > maxReason+len("FAIL b: ...") {
		t.Errorf("reason not bounded: %d bytes", len(long))
	}
	if !strings.HasSuffix(long, "...") || !strings.HasPrefix(long, "FAIL b: é") {
		t.Errorf("truncated line malformed: %q", long[:20])
	}
}
