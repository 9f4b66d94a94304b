package worker

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

func codingLaneFixture(t *testing.T) (*codingFixture, *fakeGate, *gateConn, chan Event) {
	t.Helper()
	f := newCodingFixture(t, buildEditPlugin(t))
	g := newFakeGate(t)
	f.cfg.GateURL = g.url()
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		t.Fatal(err)
	}
	obs, ev := events()
	stop := startWorker(t, Options{Config: f.cfg, Observe: obs, Executors: map[wire.Kind]Executor{wire.KindCoding: x}})
	t.Cleanup(stop)
	c := g.accept()
	if len(c.hello.Repositories) != 1 || c.hello.Repositories[0] != "demo" {
		t.Fatalf("hello repositories %v", c.hello.Repositories)
	}
	return f, g, c, ev
}

func entries(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// The lane sends the evidence batch, the worktree stays until Gate ACKs
// it, and only then does the result (with the candidate) follow.
func TestCodingLaneEvidenceBeforeCleanupAndResult(t *testing.T) {
	f, _, c, _ := codingLaneFixture(t)
	l := f.lease(wire.CodingTask{Instruction: "write a.txt a\nreport Did it|a.txt: new", Tests: [][]string{{"true"}}}, nil)
	c.lease(t, wire.Envelope{Type: wire.TypeLease, Lease: l})
	e := c.nextOf(t, wire.TypeEvidence)
	if e.Evidence.JobID != l.JobID || e.Evidence.AttemptID != l.AttemptID || e.Evidence.Batch != 1 {
		t.Fatalf("evidence envelope %+v", e.Evidence)
	}
	if _, err := evidence.ValidateBatch(1, e.Evidence.Records, evidence.Options{ArgCounts: []int{1}, BaseSHA: f.base}); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if entries(t, f.cfg.WorktreeRoot) != 1 {
		t.Fatal("the worktree is gone before the evidence was acknowledged")
	}
	c.reply(t, e.Seq, true)
	res := c.nextOf(t, wire.TypeResult)
	c.reply(t, res.Seq, true) // else the stopping Worker waits out its reply timeout
	r := res.Result
	if r.Outcome != wire.OutcomeSucceeded || r.CandidateSHA == "" || r.Output != nil || r.AgentReport == nil || r.AgentReport.Summary != "Did it" {
		t.Fatalf("result %+v", r)
	}
	var last evidence.Record
	if err := json.Unmarshal(e.Evidence.Records[len(e.Evidence.Records)-1], &last); err != nil || last.SHA != r.CandidateSHA {
		t.Fatalf("evidence does not name the candidate: %+v", last)
	}
	if entries(t, f.cfg.WorktreeRoot) != 0 || entries(t, f.cfg.RuntimeRoot) != 0 {
		t.Fatal("cleanup did not run before the result")
	}
}

// A rejected evidence batch (the attempt expired) loses the lease: the
// Worker cleans up and sends no result.
func TestCodingLaneRejectedEvidenceLosesLease(t *testing.T) {
	f, g, c, ev := codingLaneFixture(t)
	l := f.lease(wire.CodingTask{Instruction: "write a.txt a"}, nil)
	c.lease(t, wire.Envelope{Type: wire.TypeLease, Lease: l})
	e := c.nextOf(t, wire.TypeEvidence)
	c.reply(t, e.Seq, false) // reject expired
	if got := waitEvent(t, ev, EventLeaseLost); got.Code != "evidence_expired" {
		t.Fatalf("lease lost with %q", got.Code)
	}
	// Ending the connection makes the lane finish the attempt before it
	// reconnects; by then the worktree is gone and no result was sent.
	close(c.quit)
	c.waitClosed(t)
	g.accept()
	if entries(t, f.cfg.WorktreeRoot) != 0 || entries(t, f.cfg.RuntimeRoot) != 0 {
		t.Fatal("a lost attempt was not cleaned up")
	}
	for {
		select {
		case m := <-c.msgs:
			if m.Type != wire.TypeHeartbeat {
				t.Fatalf("the lost attempt sent %s", m.Type)
			}
			continue
		default:
		}
		break
	}
}

// An evidence batch the Gate could not record (reject unavailable: its
// disk is full) is sent again with the next heartbeat, and the attempt
// goes on: once it is acknowledged the result follows.
func TestCodingLaneUnavailableEvidenceIsSentAgain(t *testing.T) {
	f, _, c, _ := codingLaneFixture(t)
	l := f.lease(wire.CodingTask{Instruction: "write a.txt a\nreport Did it|a.txt: new", Tests: [][]string{{"true"}}}, nil)
	c.lease(t, wire.Envelope{Type: wire.TypeLease, Lease: l})
	first := c.nextOf(t, wire.TypeEvidence)
	c.rejectWith(t, first.Seq, wire.RejectUnavailable)
	again := c.nextOf(t, wire.TypeEvidence)
	if again.Seq <= first.Seq || again.Evidence.Batch != 1 || len(again.Evidence.Records) != len(first.Evidence.Records) {
		t.Fatalf("evidence sent again: %+v (first %+v)", again, first)
	}
	c.reply(t, again.Seq, true)
	res := c.nextOf(t, wire.TypeResult)
	if r := res.Result; r.Outcome != wire.OutcomeSucceeded || r.CandidateSHA == "" {
		t.Fatalf("result %+v", r)
	}
	c.reply(t, res.Seq, true) // else the stopping Worker waits out its reply timeout
}
