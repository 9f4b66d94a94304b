package gate

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// connectOffering is connect with an activity offer in the hello.
func connectOffering(t testing.TB, tg *testGate, slot int, offer []string) *rawWorker {
	t.Helper()
	c, err := dialWorker(t, tg.addr, testWorkerToken)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	w := &rawWorker{t: t, c: c, replies: make(chan wire.Envelope, 64), pushes: make(chan wire.Envelope, 64), closed: make(chan struct{})}
	t.Cleanup(func() { c.Close() })
	hello := &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: slot, Plugins: plugins(), Repositories: noRepos(), ActivityVersions: offer}
	if err := c.Send(wire.Envelope{Type: wire.TypeHello, Hello: hello}); err != nil {
		t.Fatal(err)
	}
	first, err := c.Receive()
	if err != nil || first.Welcome == nil {
		t.Fatalf("no welcome: %+v %v", first, err)
	}
	w.welcome = *first.Welcome
	go w.read()
	return w
}

// stage sends one activity message and then a heartbeat: the Gate handles
// a connection's messages in order, so once the heartbeat is answered the
// activity has been recorded or dropped.
func (w *rawWorker) stage(l *wire.Lease, jobID, attemptID string, s activity.Stage) {
	w.t.Helper()
	if err := w.c.Send(wire.Envelope{Type: wire.TypeActivity, Activity: &wire.Activity{JobID: jobID, AttemptID: attemptID, Version: activity.Version, Stage: s}}); err != nil {
		w.t.Fatalf("send activity: %v", err)
	}
	wantAck(w.t, w.heartbeat(l))
}

func stagesOf(evs []activity.Event) []activity.Stage {
	out := []activity.Stage{}
	for _, e := range evs {
		out = append(out, e.Stage)
	}
	return out
}

func TestActivitySelectedOnlyWhenOffered(t *testing.T) {
	cases := []struct {
		name  string
		slot  int
		offer []string
		want  string
	}{
		{"offered", 0, []string{activity.Version}, activity.Version},
		{"offered among unknown", 1, []string{"live_activity/v9", activity.Version}, activity.Version},
		{"unknown only", 2, []string{"live_activity/v9"}, ""},
		{"no offer", 3, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, sec := testConfig(t, nil)
			tg := startGate(t, cfg, sec, "", nil) // one lane per Gate: the job goes to it
			w := connectOffering(t, tg, c.slot, c.offer)
			job := tg.submit(`{"input":"x"}`)
			l := w.lease()
			if l.JobID != job.ID || l.ActivityVersion != c.want || len(l.Activity) != 0 {
				t.Fatalf("lease %+v", l)
			}
			// Activity for a lease without a selection is dropped; the
			// connection stays usable.
			w.stage(l, l.JobID, l.AttemptID, activity.StageAnalyzing)
			n := len(tg.g.act.Job(job.ID))
			if (c.want != "") != (n == 1) {
				t.Fatalf("%d events recorded", n)
			}
			wantAck(t, w.textResult(l, "X"))
		})
	}
}

func TestActivityRecordedForTheExactLease(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connectOffering(t, tg, 1, []string{activity.Version})
	job := tg.submit(`{"input":"x"}`)
	l := w.lease()
	other := connectOffering(t, tg, 2, []string{activity.Version}) // idle: no job left to lease
	tg.clock.Advance(time.Second)
	w.stage(l, l.JobID, l.AttemptID, activity.StageAnalyzing)
	at := tg.clock.Now()
	// Not this lease: another attempt, another job, another lane.
	w.stage(l, l.JobID, "ffffffffffffffffffffffffffffffff", activity.StageEditing)
	w.stage(l, "ffffffffffffffffffffffffffffffff", l.AttemptID, activity.StageEditing)
	if err := other.c.Send(wire.Envelope{Type: wire.TypeActivity, Activity: &wire.Activity{JobID: l.JobID, AttemptID: l.AttemptID, Version: activity.Version, Stage: activity.StageEditing}}); err != nil {
		t.Fatal(err)
	}
	wantReject(t, other.heartbeat(l), wire.RejectStale) // other's activity has been handled
	// Not advancing.
	w.stage(l, l.JobID, l.AttemptID, activity.StageAnalyzing)
	tg.clock.Advance(time.Second)
	w.stage(l, l.JobID, l.AttemptID, activity.StageTesting)
	evs := tg.g.act.Job(job.ID)
	want := []activity.Event{
		{JobID: job.ID, AttemptID: l.AttemptID, Ordinal: 1, Lane: "worker-1#1", Stage: activity.StageAnalyzing, At: at},
		{JobID: job.ID, AttemptID: l.AttemptID, Ordinal: 1, Lane: "worker-1#1", Stage: activity.StageTesting, At: tg.clock.Now()},
	}
	if len(evs) != 2 || evs[0] != want[0] || evs[1] != want[1] {
		t.Fatalf("activity %+v", evs)
	}
	// Removed on the terminal result.
	wantAck(t, w.textResult(l, "X"))
	if evs := tg.g.act.Job(job.ID); len(evs) != 0 {
		t.Fatalf("after result %+v", evs)
	}
	// The other lane's connection is still fine.
	select {
	case <-other.closed:
		t.Fatal("a misdirected activity closed the connection")
	default:
	}
}

func TestActivityFollowsTheLeaseDeadline(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connectOffering(t, tg, 0, []string{activity.Version})
	job := tg.submit(`{"input":"x"}`)
	l := w.lease()
	w.stage(l, l.JobID, l.AttemptID, activity.StageAnalyzing) // heartbeat at +0: deadline +30s
	tg.clock.Advance(20 * time.Second)
	wantAck(t, w.heartbeat(l)) // deadline +50s
	tg.clock.Advance(20 * time.Second)
	// Past the lease's first deadline, before the extended one.
	if got := stagesOf(tg.g.act.Job(job.ID)); len(got) != 1 {
		t.Fatalf("activity %v", got)
	}
	tg.clock.Advance(10 * time.Second) // exactly the extended deadline
	if got := tg.g.act.Job(job.ID); len(got) != 0 {
		t.Fatalf("expired activity shown: %+v", got)
	}
	c := w.push()
	if c.Cancel == nil || c.Cancel.AttemptID != l.AttemptID {
		t.Fatalf("want cancel, got %+v", c)
	}
	if tg.g.act.Len() != 0 {
		t.Fatal("expired entry kept")
	}
}

func TestActivityDroppedOnDisconnect(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connectOffering(t, tg, 0, []string{activity.Version})
	job := tg.submit(`{"input":"x"}`)
	l := w.lease()
	w.stage(l, l.JobID, l.AttemptID, activity.StageEditing)
	if n := len(tg.g.act.Job(job.ID)); n != 1 {
		t.Fatalf("%d events", n)
	}
	w.c.Close()
	<-w.closed
	deadline := time.Now().Add(waitLimit)
	for tg.g.act.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("activity kept after disconnect")
		}
		time.Sleep(2 * time.Millisecond)
	}
	// The job itself still holds its lease until expiry.
	if j := tg.job(job.ID); j.Status != "leased" {
		t.Fatalf("job %+v", j)
	}
}

// TestActivityNeverPersisted records every stage and checks that no stage
// name or version reached the database files.
func TestActivityNeverPersisted(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connectOffering(t, tg, 0, []string{activity.Version})
	job := tg.submit(`{"input":"x"}`)
	l := w.lease()
	for _, s := range activity.Stages() {
		w.stage(l, l.JobID, l.AttemptID, s)
	}
	if got := stagesOf(tg.g.act.Job(job.ID)); len(got) != activity.MaxEvents {
		t.Fatalf("activity %v", got)
	}
	wantAck(t, w.textResult(l, "X"))
	tg.stop()
	files, err := filepath.Glob(filepath.Join(filepath.Dir(tg.db), "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no database files: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{activity.Version, "analyzing", "preparing_result"} {
			if bytes.Contains(b, []byte(s)) {
				t.Fatalf("%s contains %q", filepath.Base(f), s)
			}
		}
	}
}

// TestActivityDebugRoute reads activity through the owner-only debug
// route the viewer and `forge wait -progress` use.
func TestActivityDebugRoute(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connectOffering(t, tg, 1, []string{activity.Version})
	job := tg.submit(`{"input":"x"}`)
	l := w.lease()
	w.stage(l, l.JobID, l.AttemptID, activity.StageEditing)
	path := "/v1/debug/jobs/" + job.ID + "/activity"
	code, body := tg.api("GET", path, testOwnerToken, nil)
	want := `{"live":true,"activity":[{"attempt":1,"attempt_id":"` + l.AttemptID + `","worker_id":"worker-1#1","stage":"editing","at":"2026-11-29T12:00:00.000000Z"}],"as_of":"2026-11-29T12:00:00.000000Z"}` + "\n"
	if code != 200 || string(body) != want {
		t.Fatalf("%d %s", code, body)
	}
	for _, tok := range []string{testWorkerToken, "", "wrong"} {
		if code, _ := tg.api("GET", path, tok, nil); code != 401 {
			t.Fatalf("token %q: %d", tok, code)
		}
	}
	if code, _ := tg.api("POST", path, testOwnerToken, nil); code != 405 {
		t.Fatalf("POST: %d", code)
	}
	if code, body := tg.api("GET", "/v1/debug/jobs/ffffffffffffffffffffffffffffffff/activity", testOwnerToken, nil); code != 404 || !contains(body, `"not_found"`) {
		t.Fatalf("unknown job: %d %s", code, body)
	}
	wantAck(t, w.textResult(l, "X"))
	if code, body := tg.api("GET", path, testOwnerToken, nil); code != 200 || !contains(body, `{"live":true,"activity":[],`) {
		t.Fatalf("after the result: %d %s", code, body)
	}
}
