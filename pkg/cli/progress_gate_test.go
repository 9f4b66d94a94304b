package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// TestWaitProgressLiveFromRealGate: a raw Worker lane that offered
// live_activity/v1 reports stages to the real Gate while `forge wait
// -progress` runs; each new stage appears on stderr as it happens, and
// stdout is the usual aggregate.
func TestWaitProgressLiveFromRealGate(t *testing.T) {
	addr := startRealGate(t)
	env := map[string]string{"FORGE_GATE_URL": "http://" + addr, "FORGE_OWNER_TOKEN": testToken}

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := wire.Dial(ctx, "ws://"+addr, integrationWorkerToken)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	hello := &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 0, Plugins: []string{"reference"},
		Repositories: []string{}, ActivityVersions: activity.Offer()}
	if err := c.Send(wire.Envelope{Type: wire.TypeHello, Hello: hello}); err != nil {
		t.Fatal(err)
	}
	if e, err := c.Receive(); err != nil || e.Welcome == nil {
		t.Fatalf("no welcome: %v", err)
	}
	l := &lane{t: t, c: c}

	r := runForge(t, env, `{"input":"hello"}`, "submit", "-file", "-")
	wantCode(t, r, ExitOK)
	job := decodeOut[Job](t, r)
	lease := l.lease()
	if lease.JobID != job.ID || lease.ActivityVersion != activity.Version {
		t.Fatalf("lease %+v", lease)
	}

	pr, pw := io.Pipe()
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() {
		lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
		err := Run(context.Background(), []string{"wait", "-progress", "-poll", "10ms", job.ID}, nil, &stdout, pw, lookup)
		pw.Close()
		done <- ExitCode(err)
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	nextLine := func() string {
		t.Helper()
		select {
		case s, ok := <-lines:
			if !ok {
				t.Fatal("stderr closed early")
			}
			return s
		case <-time.After(waitLimit):
			t.Fatal("no progress line")
		}
		return ""
	}
	send := func(s activity.Stage) {
		t.Helper()
		p := &wire.Activity{JobID: lease.JobID, AttemptID: lease.AttemptID, Version: activity.Version, Stage: s}
		if err := c.Send(wire.Envelope{Type: wire.TypeActivity, Activity: p}); err != nil {
			t.Fatal(err)
		}
	}
	send(activity.StageAnalyzing)
	if got := nextLine(); got != "forge: progress: analyzing (attempt 1 on worker-1)" {
		t.Fatalf("stderr line %q", got)
	}
	send(activity.StageTesting)
	if got := nextLine(); got != "forge: progress: testing (attempt 1 on worker-1)" {
		t.Fatalf("stderr line %q", got)
	}
	out := "HELLO"
	l.result(&wire.Result{JobID: lease.JobID, AttemptID: lease.AttemptID, Outcome: wire.OutcomeSucceeded, Output: &out})
	for s := range lines {
		t.Fatalf("unexpected stderr line %q", s)
	}
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	agg := decodeOut[Aggregate](t, result{stdout: stdout.String()})
	if agg.Job.Status != "succeeded" || *agg.Job.Result != out {
		t.Fatalf("aggregate %+v", agg.Job)
	}
}
