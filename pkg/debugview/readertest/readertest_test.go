package readertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/debugview"
)

func sample() Dataset {
	base := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	d := Dataset{Attempts: map[string][]debugview.Attempt{}, Events: map[string][]debugview.Event{}}
	for i := 0; i < 9; i++ {
		id := fmt.Sprintf("j_%02d", i)
		at := base.Add(time.Duration(i/3) * time.Microsecond) // ties broken by id
		d.Jobs = append(d.Jobs, debugview.Job{ID: id, Kind: "text", Status: "pending", CreatedAt: at, UpdatedAt: at})
		d.Attempts[id] = []debugview.Attempt{{ID: "a" + id, Ordinal: 1, Status: "leased", Lane: "w", LeasedAt: at, DeadlineAt: at.Add(time.Second)}}
		for s := int64(1); s <= int64(i); s++ {
			d.Events[id] = append(d.Events[id], debugview.Event{Seq: s * 2, Type: "submitted", At: at})
		}
	}
	for i := 0; i < 5; i++ {
		d.Lanes = append(d.Lanes, debugview.Lane{Lane: fmt.Sprintf("worker-1#%d", i), WorkerID: "worker-1", Connected: i%2 == 0, ConnectedAt: base})
	}
	return d
}

func TestMemoryPassesCheck(t *testing.T) {
	d := sample()
	want := Dataset{Attempts: d.Attempts, Events: d.Events, Lanes: d.Lanes}
	for i := len(d.Jobs) - 1; i >= 0; i-- { // j_08 … j_00 is newest first
		want.Jobs = append(want.Jobs, d.Jobs[i])
	}
	Check(t, NewMemory(want), want)
}

// badReader breaks one rule of the contract; Check must notice.
type badReader struct {
	*Memory
	mode string
}

func (b badReader) DebugJobs(ctx context.Context, after string, limit int) ([]debugview.Job, error) {
	jobs, err := b.Memory.DebugJobs(ctx, after, limit)
	if b.mode == "inclusive" && after != "" {
		j, _, _ := b.Memory.DebugJob(ctx, after)
		jobs = append([]debugview.Job{j}, jobs...)
		if len(jobs) > limit {
			jobs = jobs[:limit]
		}
	}
	return jobs, err
}

func (b badReader) DebugEvents(ctx context.Context, id string, after int64, limit int) ([]debugview.Event, error) {
	if b.mode == "overfull" {
		return b.Memory.DebugEvents(ctx, id, after, limit+1)
	}
	return b.Memory.DebugEvents(ctx, id, after, limit)
}

func TestCheckCatchesBrokenReaders(t *testing.T) {
	d := sample()
	want := Dataset{Attempts: d.Attempts, Events: d.Events, Lanes: d.Lanes}
	for i := len(d.Jobs) - 1; i >= 0; i-- {
		want.Jobs = append(want.Jobs, d.Jobs[i])
	}
	for mode, wantMsg := range map[string]string{"inclusive": "jobs walked with limit", "overfull": "DebugEvents returned"} {
		t.Run(mode, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			func() {
				defer func() { recover() }()
				Check(rec, badReader{NewMemory(want), mode}, want)
			}()
			if !rec.failed || !strings.Contains(rec.msg, wantMsg) {
				t.Fatalf("Check on a %s reader: failed=%v %q", mode, rec.failed, rec.msg)
			}
		})
	}
}

// recordingTB turns Fatalf into a recorded failure plus a panic that the
// caller recovers, so a failing Check can be observed.
type recordingTB struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	panic(r)
}
