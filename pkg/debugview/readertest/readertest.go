// Package readertest holds the conformance check for debugview.Reader
// implementations and an in-memory Reader that passes it.
//
// A store-backed Reader is checked by seeding its database however the
// store likes, describing the result as a Dataset (every job newest first,
// attempts and events per job, lanes by name) and calling Check. Check
// walks every listing with several page sizes, so ordering, the strictly
// after semantics of positions, limits and ErrNotFound are all exercised.
package readertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/debugview"
)

// Dataset is the full, ordered content a Reader is expected to serve.
type Dataset struct {
	// Jobs newest first (submission order reversed).
	Jobs []debugview.Job
	// Attempts per job id, by ordinal.
	Attempts map[string][]debugview.Attempt
	// Events per job id, by Seq.
	Events map[string][]debugview.Event
	// Lanes by Lane ascending.
	Lanes []debugview.Lane
}

// Memory is an in-memory debugview.Reader over a Dataset.
type Memory struct{ d Dataset }

// NewMemory returns a Reader serving d. Jobs are served in the given
// (newest first) order; copies of the other slices are sorted into the
// Reader's orders, so they may be given in any order.
func NewMemory(d Dataset) *Memory {
	c := Dataset{Attempts: map[string][]debugview.Attempt{}, Events: map[string][]debugview.Event{}}
	c.Jobs = append(c.Jobs, d.Jobs...)
	for id, as := range d.Attempts {
		c.Attempts[id] = append([]debugview.Attempt(nil), as...)
		sort.Slice(c.Attempts[id], func(i, j int) bool { return c.Attempts[id][i].Ordinal < c.Attempts[id][j].Ordinal })
	}
	for id, es := range d.Events {
		c.Events[id] = append([]debugview.Event(nil), es...)
		sort.Slice(c.Events[id], func(i, j int) bool { return c.Events[id][i].Seq < c.Events[id][j].Seq })
	}
	c.Lanes = append(c.Lanes, d.Lanes...)
	sort.Slice(c.Lanes, func(i, j int) bool { return c.Lanes[i].Lane < c.Lanes[j].Lane })
	return &Memory{d: c}
}

// DebugJobs implements debugview.Reader.
func (m *Memory) DebugJobs(_ context.Context, afterID string, limit int) ([]debugview.Job, error) {
	start := 0
	if afterID != "" {
		start = len(m.d.Jobs)
		for i, j := range m.d.Jobs {
			if j.ID == afterID {
				start = i + 1
			}
		}
	}
	rest := m.d.Jobs[start:]
	return append([]debugview.Job(nil), rest[:min(max(limit, 0), len(rest))]...), nil
}

// DebugLanes implements debugview.Reader.
func (m *Memory) DebugLanes(_ context.Context, after string, limit int) ([]debugview.Lane, error) {
	var out []debugview.Lane
	for _, l := range m.d.Lanes {
		if l.Lane > after && len(out) < limit {
			out = append(out, l)
		}
	}
	return out, nil
}

func (m *Memory) find(id string) (debugview.Job, bool) {
	for _, j := range m.d.Jobs {
		if j.ID == id {
			return j, true
		}
	}
	return debugview.Job{}, false
}

// DebugJob implements debugview.Reader.
func (m *Memory) DebugJob(_ context.Context, id string) (debugview.Job, []debugview.Attempt, error) {
	j, ok := m.find(id)
	if !ok {
		return debugview.Job{}, nil, debugview.ErrNotFound
	}
	return j, append([]debugview.Attempt(nil), m.d.Attempts[id]...), nil
}

// DebugEvents implements debugview.Reader.
func (m *Memory) DebugEvents(_ context.Context, id string, afterSeq int64, limit int) ([]debugview.Event, error) {
	if _, ok := m.find(id); !ok {
		return nil, debugview.ErrNotFound
	}
	var out []debugview.Event
	for _, e := range m.d.Events[id] {
		if e.Seq > afterSeq && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// pageSizes are the limits every listing is walked with.
func pageSizes(n int) []int { return []int{1, 2, 3, 7, max(n, 1), n + 1, 100} }

// Check verifies r against want. The unknown job id "no-such-job-0" must
// not exist in r.
func Check(t testing.TB, r debugview.Reader, want Dataset) {
	t.Helper()
	ctx := context.Background()
	for _, size := range pageSizes(len(want.Jobs)) {
		var got []debugview.Job
		after := ""
		for pages := 0; pages <= len(want.Jobs)+1; pages++ {
			page, err := r.DebugJobs(ctx, after, size)
			if err != nil {
				t.Fatalf("DebugJobs(limit %d): %v", size, err)
			}
			if len(page) > size {
				t.Fatalf("DebugJobs returned %d jobs for limit %d", len(page), size)
			}
			got = append(got, page...)
			if len(page) < size {
				break
			}
			after = page[len(page)-1].ID
		}
		if err := same(got, want.Jobs); err != nil {
			t.Fatalf("jobs walked with limit %d: %v", size, err)
		}
	}
	for _, size := range pageSizes(len(want.Lanes)) {
		var got []debugview.Lane
		after := ""
		for pages := 0; pages <= len(want.Lanes)+1; pages++ {
			page, err := r.DebugLanes(ctx, after, size)
			if err != nil {
				t.Fatalf("DebugLanes(limit %d): %v", size, err)
			}
			if len(page) > size {
				t.Fatalf("DebugLanes returned %d lanes for limit %d", len(page), size)
			}
			got = append(got, page...)
			if len(page) < size {
				break
			}
			after = page[len(page)-1].Lane
		}
		if err := same(got, want.Lanes); err != nil {
			t.Fatalf("lanes walked with limit %d: %v", size, err)
		}
	}
	for _, job := range want.Jobs {
		gotJob, attempts, err := r.DebugJob(ctx, job.ID)
		if err != nil {
			t.Fatalf("DebugJob: %v", err)
		}
		if err := same([]debugview.Job{gotJob}, []debugview.Job{job}); err != nil {
			t.Fatalf("job %s: %v", job.ID, err)
		}
		if err := same(attempts, want.Attempts[job.ID]); err != nil {
			t.Fatalf("attempts of %s: %v", job.ID, err)
		}
		events := want.Events[job.ID]
		for _, size := range pageSizes(len(events)) {
			var got []debugview.Event
			var after int64
			for pages := 0; pages <= len(events)+1; pages++ {
				page, err := r.DebugEvents(ctx, job.ID, after, size)
				if err != nil {
					t.Fatalf("DebugEvents: %v", err)
				}
				if len(page) > size {
					t.Fatalf("DebugEvents returned %d events for limit %d", len(page), size)
				}
				got = append(got, page...)
				if len(page) < size {
					break
				}
				after = page[len(page)-1].Seq
			}
			if err := same(got, events); err != nil {
				t.Fatalf("events of %s walked with limit %d: %v", job.ID, size, err)
			}
		}
	}
	if jobs, err := r.DebugJobs(ctx, "no-such-job-0", 10); err != nil || len(jobs) != 0 {
		t.Fatalf("DebugJobs after an unknown id = %d jobs, %v; want none", len(jobs), err)
	}
	if _, _, err := r.DebugJob(ctx, "no-such-job-0"); !errors.Is(err, debugview.ErrNotFound) {
		t.Fatalf("DebugJob(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := r.DebugEvents(ctx, "no-such-job-0", 0, 10); !errors.Is(err, debugview.ErrNotFound) {
		t.Fatalf("DebugEvents(unknown) = %v, want ErrNotFound", err)
	}
}

// same compares two record slices field by field, with times compared as
// instants (zero equals zero) and nil equal to empty.
func same[T any](got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := normalize(reflect.ValueOf(got[i])), normalize(reflect.ValueOf(want[i]))
		if !reflect.DeepEqual(g, w) {
			return fmt.Errorf("record %d differs: got %+v, want %+v", i, g, w)
		}
	}
	return nil
}

// normalize copies a record struct with every time.Time in UTC without a
// monotonic reading.
func normalize(v reflect.Value) any {
	out := reflect.New(v.Type()).Elem()
	out.Set(v)
	for i := 0; i < out.NumField(); i++ {
		f := out.Field(i)
		if t, ok := f.Interface().(time.Time); ok {
			if t.IsZero() {
				f.Set(reflect.ValueOf(time.Time{}))
			} else {
				f.Set(reflect.ValueOf(t.UTC().Round(0)))
			}
		}
	}
	return out.Interface()
}
