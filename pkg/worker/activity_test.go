package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// stagedExec is an Executor that drives the attempt's tracker the way the
// coding pipeline does, then succeeds.
type stagedExec struct {
	mu    sync.Mutex
	calls int
}

func (x *stagedExec) Execute(ctx context.Context, a *Attempt) Report {
	x.mu.Lock()
	x.calls++
	x.mu.Unlock()
	tr := a.Stages
	tr.Progress(plugin.StageStarted)
	tr.Progress(plugin.StageWorking)
	tr.Progress(plugin.StageWorking)
	tr.Progress(plugin.StageFinalizing)
	tr.ChecksStarted(2)
	tr.ChecksEnded()
	return Report{Succeeded: true, Output: "OK"}
}

func (x *stagedExec) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.calls
}

func activityLease(version string, payload json.RawMessage) wire.Envelope {
	e := textLease("job-7", "att-7", testPolicy("reference"), "x")
	e.Lease.ActivityVersion = version
	e.Lease.Activity = payload
	return e
}

// untilResult returns the activity messages the Worker sends before its
// result (acking heartbeats), and the result.
func untilResult(t *testing.T, c *gateConn) ([]wire.Activity, *wire.Result, uint64) {
	t.Helper()
	var acts []wire.Activity
	for {
		e := c.next(t)
		switch e.Type {
		case wire.TypeHeartbeat:
			c.reply(t, e.Seq, true)
		case wire.TypeActivity:
			acts = append(acts, *e.Activity)
		case wire.TypeResult:
			return acts, e.Result, e.Seq
		default:
			t.Fatalf("unexpected %s", e.Type)
		}
	}
}

func TestLaneActivity(t *testing.T) {
	g := newFakeGate(t)
	x := &stagedExec{}
	startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}})
	c := g.accept()
	if !reflect.DeepEqual(c.hello.ActivityVersions, []string{activity.Version}) {
		t.Fatalf("hello offers %q", c.hello.ActivityVersions)
	}

	t.Run("selected", func(t *testing.T) {
		c.lease(t, activityLease(activity.Version, nil))
		acts, res, seq := untilResult(t, c)
		var stages []activity.Stage
		for _, a := range acts {
			if a.JobID != "job-7" || a.AttemptID != "att-7" || a.Version != activity.Version {
				t.Fatalf("activity %+v", a)
			}
			stages = append(stages, a.Stage)
		}
		if !reflect.DeepEqual(stages, activity.Stages()) {
			t.Fatalf("stages %v", stages)
		}
		if res.Outcome != wire.OutcomeSucceeded {
			t.Fatalf("result %+v", res)
		}
		c.reply(t, seq, true)
	})
	t.Run("not selected", func(t *testing.T) {
		c.lease(t, activityLease("", nil))
		acts, res, seq := untilResult(t, c)
		if len(acts) != 0 || res.Outcome != wire.OutcomeSucceeded {
			t.Fatalf("activity %+v result %+v", acts, res)
		}
		c.reply(t, seq, true)
	})
	for name, e := range map[string]wire.Envelope{
		"unknown version":  activityLease("live_activity/v9", nil),
		"activity payload": activityLease(activity.Version, json.RawMessage(`{"stage":"editing"}`)),
		"payload only":     activityLease("", json.RawMessage(`{}`)),
	} {
		t.Run(name, func(t *testing.T) {
			before := x.count()
			c.lease(t, e)
			acts, res, seq := untilResult(t, c)
			if len(acts) != 0 || res.Outcome != wire.OutcomeFailed || res.FailureCode != wire.FailureInvalidActivity ||
				res.Disposition != wire.DispositionTerminal {
				t.Fatalf("activity %+v result %+v", acts, res)
			}
			if x.count() != before {
				t.Fatal("the executor ran")
			}
			c.reply(t, seq, true)
		})
	}
}

// TestTextExecutorActivity runs the reference plugin (progress started,
// finalizing) through the text executor: only analyzing is emitted.
func TestTextExecutorActivity(t *testing.T) {
	ref := filepath.Join(t.TempDir(), "forge-ref-plugin")
	cmd := exec.Command("go", "build", "-o", ref, "./cmd/forge-ref-plugin")
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build reference plugin: %v\n%s", err, b)
	}
	c, _ := hostFixture(t)
	c.Plugins = []Plugin{{ID: "reference", Argv: []string{ref}}}
	c.EnvironmentAllowlist = []string{"PATH"}
	if _, err := CheckHost(c, envWith(map[string]string{"FORGE_WORKER_TOKEN": testToken})); err != nil {
		t.Fatal(err)
	}
	x := NewTextExecutor(c, lookupIn(workerEnv), nil)
	var got []activity.Payload
	tr := activity.NewTracker("j_1", "a_1", activity.Version, func(p activity.Payload) { got = append(got, p) })
	r := x.Execute(context.Background(), &Attempt{Lease: leaseFor(t, testPolicy("reference"), "hello"), Stages: tr})
	if !r.Succeeded || r.Output != "HELLO" {
		t.Fatalf("report %+v", r)
	}
	want := []activity.Payload{{JobID: "j_1", AttemptID: "a_1", Version: activity.Version, Stage: activity.StageAnalyzing}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("activity %+v", got)
	}
	// Without a tracker in the context nothing is emitted and nothing breaks.
	if r := x.Execute(context.Background(), &Attempt{Lease: leaseFor(t, testPolicy("reference"), "hi")}); !r.Succeeded {
		t.Fatalf("report %+v", r)
	}
}

// TestCodingActivity runs the coding pipeline with the edit plugin
// (progress started, finalizing) and real checks.
func TestCodingActivity(t *testing.T) {
	f := newCodingFixture(t, buildEditPlugin(t))
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		tests [][]string
		ok    bool
		want  []activity.Stage
	}{
		{"checks pass", [][]string{{"test", "-f", "hello.txt"}, {"true"}}, true,
			[]activity.Stage{activity.StageAnalyzing, activity.StageTesting, activity.StagePreparingResult}},
		{"stop on failure", [][]string{{"false"}, {"true"}}, false,
			[]activity.Stage{activity.StageAnalyzing, activity.StageTesting, activity.StagePreparingResult}},
		{"no checks", nil, true, []activity.Stage{activity.StageAnalyzing}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []activity.Stage
			l := f.lease(wire.CodingTask{Instruction: "write hello.txt hi", Tests: c.tests}, nil)
			l.AttemptID = fmt.Sprintf("att%d", i)
			tr := activity.NewTracker(l.JobID, l.AttemptID, activity.Version, func(p activity.Payload) { got = append(got, p.Stage) })
			r := x.Execute(context.Background(), &Attempt{Lease: l, Bind: func(context.Context, int, []json.RawMessage) error { return nil }, Stages: tr})
			if r.Succeeded != c.ok {
				t.Fatalf("report %+v", r)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("stages %v, want %v", got, c.want)
			}
		})
	}
}

// TestRealGateLiveActivity runs a coding job through the production Gate
// and a Worker lane whose check blocks on a FIFO: while it blocks, the
// Gate's owner-only activity route shows the attempt in testing; once the
// check is released and the result is in, the activity is gone.
func TestRealGateLiveActivity(t *testing.T) {
	f := newCodingFixture(t, buildEditPlugin(t))
	fifo := filepath.Join(t.TempDir(), "release")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	exec := `{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":64,"git_output_bytes":1048576}`
	conf := fmt.Sprintf(`{"version":1,"listen":"127.0.0.1:0","database":%q,"owner_token_env":"OWNER",
 "recovery_interval":"50ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"10s","retry_base":"1s","max_attempts":2},"default_execution":%s,
 "workers":[{"id":"worker-1","pool":"local","token_env":"WTOKEN","concurrency":1}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":%s}]}`, privateDB(t), exec, exec)
	rg := startRealGate(t, []byte(conf), "")
	f.cfg.GateURL = rg.url()
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		t.Fatal(err)
	}
	obs, ev := events()
	stop := startWorker(t, Options{Config: f.cfg, Observe: obs, Executors: map[wire.Kind]Executor{wire.KindCoding: x}})
	defer stop()
	waitEvent(t, ev, EventConnected)

	task, _ := json.Marshal(map[string]any{"repository_id": "demo", "base_sha": f.base,
		"instruction": "write hello.txt hi", "tests": [][]string{{"cat", fifo}, {"test", "-f", "hello.txt"}}})
	var job struct{ ID string }
	if err := json.Unmarshal(rg.api("POST", "/v1/jobs", task), &job); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Live     bool `json:"live"`
		Activity []struct {
			Attempt  int    `json:"attempt"`
			WorkerID string `json:"worker_id"`
			Stage    string `json:"stage"`
		} `json:"activity"`
	}
	read := func() page {
		var p page
		if err := json.Unmarshal(rg.api("GET", "/v1/debug/jobs/"+job.ID+"/activity", nil), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Observe (poll) until the check blocks: the stage is then testing.
	deadline := time.Now().Add(30 * time.Second)
	var p page
	for p = read(); len(p.Activity) == 0 || p.Activity[len(p.Activity)-1].Stage != "testing"; p = read() {
		if time.Now().After(deadline) {
			t.Fatalf("never saw testing: %+v", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var stages []string
	for _, a := range p.Activity {
		if !p.Live || a.Attempt != 1 || a.WorkerID != "worker-1" {
			t.Fatalf("activity %+v", a)
		}
		stages = append(stages, a.Stage)
	}
	if !reflect.DeepEqual(stages, []string{"analyzing", "testing"}) {
		t.Fatalf("stages %v", stages)
	}
	released := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			err = w.Close()
		}
		released <- err
	}()
	if err := recv(t, released, "the check to read the FIFO"); err != nil {
		t.Fatal(err)
	}
	if e := waitEvent(t, ev, EventReported); e.JobID != job.ID || e.Code != "" {
		t.Fatalf("reported %+v", e)
	}
	if p := read(); len(p.Activity) != 0 {
		t.Fatalf("activity after the result: %+v", p)
	}
}
