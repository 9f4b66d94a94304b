package activity

import (
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// recorder collects emitted payloads.
type recorder struct {
	mu  sync.Mutex
	got []Payload
}

func (r *recorder) emit(p Payload) {
	r.mu.Lock()
	r.got = append(r.got, p)
	r.mu.Unlock()
}

func (r *recorder) stages() []Stage {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []Stage{}
	for _, p := range r.got {
		out = append(out, p.Stage)
	}
	return out
}

func TestTrackerSequences(t *testing.T) {
	type step func(*Tracker)
	progress := func(s plugin.Stage) step { return func(t *Tracker) { t.Progress(s) } }
	checks := func(n int) step { return func(t *Tracker) { t.ChecksStarted(n) } }
	ended := func(t *Tracker) { t.ChecksEnded() }
	cases := []struct {
		name  string
		steps []step
		want  []Stage
	}{
		{"text job", []step{progress(plugin.StageStarted), progress(plugin.StageWorking), progress(plugin.StageFinalizing)},
			[]Stage{StageAnalyzing, StageEditing}},
		{"coding job with checks", []step{progress(plugin.StageStarted), progress(plugin.StageWorking), progress(plugin.StageWorking),
			progress(plugin.StageFinalizing), checks(3), ended},
			[]Stage{StageAnalyzing, StageEditing, StageTesting, StagePreparingResult}},
		{"empty check list", []step{progress(plugin.StageStarted), progress(plugin.StageWorking), checks(0), ended},
			[]Stage{StageAnalyzing, StageEditing}},
		{"finalizing never advances", []step{progress(plugin.StageFinalizing), progress(plugin.StageFinalizing)}, []Stage{}},
		{"no progress, checks only", []step{checks(1), ended}, []Stage{StageTesting, StagePreparingResult}},
		{"started after working is dropped", []step{progress(plugin.StageWorking), progress(plugin.StageStarted)}, []Stage{StageEditing}},
		{"progress after checks is dropped", []step{checks(2), progress(plugin.StageStarted), progress(plugin.StageWorking), ended},
			[]Stage{StageTesting, StagePreparingResult}},
		{"ended without a batch", []step{progress(plugin.StageStarted), ended}, []Stage{StageAnalyzing}},
		{"second batch adds nothing", []step{checks(1), ended, checks(1), ended}, []Stage{StageTesting, StagePreparingResult}},
		{"unknown plugin stage", []step{progress("thinking")}, []Stage{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r recorder
			tr := NewTracker(jobA, attA, Version, r.emit)
			for _, s := range c.steps {
				s(tr)
			}
			if got := r.stages(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("stages %v, want %v", got, c.want)
			}
			for _, p := range r.got {
				if p.JobID != jobA || p.AttemptID != attA || p.Version != Version || p.Validate() != nil {
					t.Fatalf("payload %+v", p)
				}
			}
		})
	}
}

// TestTrackerStopOnFailure models the check runner's stop-on-failure path:
// ChecksEnded runs from a defer while the failure unwinds.
func TestTrackerStopOnFailure(t *testing.T) {
	var r recorder
	tr := NewTracker(jobA, attA, Version, r.emit)
	runChecks := func(n int) (failed bool) {
		tr.ChecksStarted(n)
		defer tr.ChecksEnded()
		for i := 0; i < n; i++ {
			if i == 1 {
				return true // second check failed: stop
			}
		}
		return false
	}
	if !runChecks(5) {
		t.Fatal("model did not fail")
	}
	if got := r.stages(); !reflect.DeepEqual(got, []Stage{StageTesting, StagePreparingResult}) {
		t.Fatalf("stages %v", got)
	}
}

func TestTrackerDisabled(t *testing.T) {
	var r recorder
	for name, tr := range map[string]*Tracker{
		"not selected":    NewTracker(jobA, attA, "", r.emit),
		"unknown version": NewTracker(jobA, attA, "live_activity/v2", r.emit),
		"no sink":         NewTracker(jobA, attA, Version, nil),
		"nil":             nil,
	} {
		tr.Progress(plugin.StageStarted)
		tr.Progress(plugin.StageWorking)
		tr.ChecksStarted(2)
		tr.ChecksEnded()
		if tr.Enabled() {
			t.Errorf("%s: enabled", name)
		}
	}
	if len(r.got) != 0 {
		t.Fatalf("disabled trackers emitted %v", r.stages())
	}
	if !NewTracker(jobA, attA, Version, r.emit).Enabled() {
		t.Fatal("selected tracker disabled")
	}
}

// TestTrackerEmitsOnlyIdentityAndStage encodes every emitted payload and
// checks that its keys are exactly the four allowed ones, whatever the
// plugin said in its progress text.
func TestTrackerEmitsOnlyIdentityAndStage(t *testing.T) {
	var r recorder
	tr := NewTracker(jobA, attA, Version, r.emit)
	tr.Progress(plugin.StageStarted)
	tr.Progress(plugin.StageWorking)
	tr.ChecksStarted(1)
	tr.ChecksEnded()
	if len(r.got) != MaxEvents {
		t.Fatalf("%d events", len(r.got))
	}
	for _, p := range r.got {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 4 || m["job_id"] != jobA || m["attempt_id"] != attA || m["version"] != Version || m["stage"] != string(p.Stage) {
			t.Fatalf("encoded payload %s", b)
		}
	}
}

// TestTrackerConcurrent drives one tracker from several goroutines: the
// emitted stages are still strictly increasing and at most MaxEvents.
func TestTrackerConcurrent(t *testing.T) {
	var r recorder
	tr := NewTracker(jobA, attA, Version, r.emit)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			for j := 0; j < 50; j++ {
				switch (i + j) % 4 {
				case 0:
					tr.Progress(plugin.StageStarted)
				case 1:
					tr.Progress(plugin.StageWorking)
				case 2:
					tr.ChecksStarted(1)
				case 3:
					tr.ChecksEnded()
				}
			}
		}(i)
	}
	close(start)
	wg.Wait()
	got := r.stages()
	if len(got) == 0 || len(got) > MaxEvents {
		t.Fatalf("%d events", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Rank() <= got[i-1].Rank() {
			t.Fatalf("not strictly advancing: %v", got)
		}
	}
}
