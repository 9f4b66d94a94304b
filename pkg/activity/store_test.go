package activity

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// clock is a manual clock for a Store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 11, 29, 20, 0, 0, 123456789, time.FixedZone("x", 3600))}
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const (
	lane1 = "worker-1"
	gen1  = "11111111111111111111111111111111"
	gen2  = "22222222222222222222222222222222"
)

func lease(c *clock, job, att, lane, gen string) Lease {
	return Lease{JobID: job, AttemptID: att, Ordinal: 1, Lane: lane, Generation: gen, Version: Version, Deadline: c.now().Add(time.Minute)}
}

func pay(job, att string, s Stage) Payload {
	return Payload{JobID: job, AttemptID: att, Version: Version, Stage: s}
}

func mustBegin(t *testing.T, s *Store, l Lease) {
	t.Helper()
	if !s.Begin(l) {
		t.Fatalf("Begin(%+v) refused", l)
	}
}

func TestStoreRecordsInOrderWithReceiveTime(t *testing.T) {
	c := newClock()
	s := NewStore(c.now)
	l := lease(c, jobA, attA, lane1, gen1)
	l.Ordinal = 2
	mustBegin(t, s, l)
	var want []Event
	for i, st := range Stages() {
		c.add(time.Second)
		ev, err := s.Record(lane1, gen1, pay(jobA, attA, st))
		if err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
		w := Event{JobID: jobA, AttemptID: attA, Ordinal: 2, Lane: lane1, Stage: st, At: c.now().UTC()}
		if ev != w || ev.At.Location() != time.UTC {
			t.Fatalf("event %+v, want %+v", ev, w)
		}
		want = append(want, w)
	}
	if got := s.Job(jobA); !reflect.DeepEqual(got, want) {
		t.Fatalf("Job = %+v", got)
	}
	if got := s.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Snapshot = %+v", got)
	}
	if got := s.Job("other"); got == nil || len(got) != 0 {
		t.Fatalf("unknown job: %#v", got)
	}
}

func TestStoreStrictAdvanceAndLimit(t *testing.T) {
	cases := []struct {
		name   string
		stages []Stage
		errs   []error
	}{
		{"repeat", []Stage{StageAnalyzing, StageAnalyzing}, []error{nil, ErrOrder}},
		{"backwards", []Stage{StageTesting, StageEditing}, []error{nil, ErrOrder}},
		{"skip ahead", []Stage{StageAnalyzing, StageTesting, StagePreparingResult}, []error{nil, nil, nil}},
		{"fifth event", []Stage{StageAnalyzing, StageEditing, StageTesting, StagePreparingResult, StagePreparingResult},
			[]error{nil, nil, nil, nil, ErrOrder}},
		{"invalid stage", []Stage{"started"}, []error{ErrInvalid}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			s := NewStore(c.now)
			mustBegin(t, s, lease(c, jobA, attA, lane1, gen1))
			accepted := 0
			for i, st := range tc.stages {
				_, err := s.Record(lane1, gen1, pay(jobA, attA, st))
				if !errors.Is(err, tc.errs[i]) {
					t.Fatalf("record %d (%s): %v, want %v", i, st, err, tc.errs[i])
				}
				if err == nil {
					accepted++
				}
			}
			if got := s.Job(jobA); len(got) != accepted || len(got) > MaxEvents {
				t.Fatalf("%d events kept, %d accepted", len(got), accepted)
			}
		})
	}
}

func TestStoreIdentity(t *testing.T) {
	const otherJob, otherAtt = "job-2", "att-2"
	cases := []struct {
		name      string
		lane, gen string
		p         Payload
		want      error
	}{
		{"exact", lane1, gen1, pay(jobA, attA, StageEditing), nil},
		{"other job", lane1, gen1, pay(otherJob, attA, StageEditing), ErrStale},
		{"other attempt", lane1, gen1, pay(jobA, otherAtt, StageEditing), ErrStale},
		{"other lane", "worker-1#1", gen1, pay(jobA, attA, StageEditing), ErrStale},
		{"other generation", lane1, gen2, pay(jobA, attA, StageEditing), ErrStale},
		{"unknown version", lane1, gen1, Payload{JobID: jobA, AttemptID: attA, Version: "live_activity/v2", Stage: StageEditing}, ErrInvalid},
		{"no version", lane1, gen1, Payload{JobID: jobA, AttemptID: attA, Stage: StageEditing}, ErrInvalid},
		{"bad id", lane1, gen1, pay("../x", attA, StageEditing), ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			s := NewStore(c.now)
			mustBegin(t, s, lease(c, jobA, attA, lane1, gen1))
			_, err := s.Record(tc.lane, tc.gen, tc.p)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			want := 0
			if tc.want == nil {
				want = 1
			}
			if n := len(s.Job(jobA)); n != want {
				t.Fatalf("%d events recorded", n)
			}
		})
	}
}

// TestStoreVersionMustBeTheSelectedOne covers a lease whose selected
// version differs from the payload's. With one known version this can only
// arise from a lease entry written by a future version; the check stays.
func TestStoreVersionMustBeTheSelectedOne(t *testing.T) {
	c := newClock()
	s := NewStore(c.now)
	mustBegin(t, s, lease(c, jobA, attA, lane1, gen1))
	s.entries[attA].lease.Version = "live_activity/v0"
	if _, err := s.Record(lane1, gen1, pay(jobA, attA, StageEditing)); err != ErrVersion {
		t.Fatalf("err %v", err)
	}
	if len(s.Job(jobA)) != 0 {
		t.Fatal("recorded")
	}
}

func TestStoreNotSelectedIsNotTracked(t *testing.T) {
	c := newClock()
	s := NewStore(c.now)
	for name, l := range map[string]Lease{
		"no version":      {JobID: jobA, AttemptID: attA, Ordinal: 1, Lane: lane1, Generation: gen1},
		"unknown version": {JobID: jobA, AttemptID: attA, Ordinal: 1, Lane: lane1, Generation: gen1, Version: "live_activity/v2"},
		"bad job":         {JobID: "", AttemptID: attA, Ordinal: 1, Lane: lane1, Generation: gen1, Version: Version},
		"bad ordinal":     {JobID: jobA, AttemptID: attA, Lane: lane1, Generation: gen1, Version: Version},
		"no lane":         {JobID: jobA, AttemptID: attA, Ordinal: 1, Generation: gen1, Version: Version},
	} {
		if s.Begin(l) {
			t.Errorf("%s: tracked", name)
		}
	}
	if _, err := s.Record(lane1, gen1, pay(jobA, attA, StageAnalyzing)); err != ErrStale || s.Len() != 0 {
		t.Fatalf("err %v, len %d", err, s.Len())
	}
}

func TestStoreExpiry(t *testing.T) {
	c := newClock()
	s := NewStore(c.now)
	l := lease(c, jobA, attA, lane1, gen1)
	mustBegin(t, s, l)
	if _, err := s.Record(lane1, gen1, pay(jobA, attA, StageAnalyzing)); err != nil {
		t.Fatal(err)
	}
	// A heartbeat moves the deadline; a later, shorter one and a foreign
	// one do not.
	s.Extend(jobA, attA, lane1, gen1, l.Deadline.Add(time.Minute))
	s.Extend(jobA, attA, lane1, gen1, l.Deadline)
	s.Extend(jobA, attA, lane1, gen2, l.Deadline.Add(time.Hour))
	s.Extend("job-2", attA, lane1, gen1, l.Deadline.Add(time.Hour))
	c.add(time.Minute + 30*time.Second) // past the first deadline, before the extended one
	if _, err := s.Record(lane1, gen1, pay(jobA, attA, StageEditing)); err != nil {
		t.Fatalf("after extension: %v", err)
	}
	c.add(30 * time.Second) // exactly the extended deadline
	if got := s.Job(jobA); len(got) != 0 {
		t.Fatalf("expired entry still shown: %+v", got)
	}
	if s.Len() != 0 {
		t.Fatal("expired entry kept")
	}
	// Record at the deadline drops the entry too.
	mustBegin(t, s, lease(c, jobA, attA, lane1, gen1))
	c.add(time.Minute)
	if _, err := s.Record(lane1, gen1, pay(jobA, attA, StageAnalyzing)); err != ErrExpired || s.Len() != 0 {
		t.Fatalf("err %v len %d", err, s.Len())
	}
	// Sweep.
	mustBegin(t, s, lease(c, jobA, attA, lane1, gen1))
	mustBegin(t, s, Lease{JobID: jobA, AttemptID: "att-long", Ordinal: 2, Lane: "worker-2", Generation: gen1, Version: Version, Deadline: c.now().Add(time.Hour)})
	c.add(time.Minute)
	if n := s.Sweep(); n != 1 || s.Len() != 1 {
		t.Fatalf("swept %d, %d left", n, s.Len())
	}
}

func TestStoreRemoval(t *testing.T) {
	c := newClock()
	t.Run("terminal result", func(t *testing.T) {
		s := NewStore(c.now)
		mustBegin(t, s, lease(c, jobA, attA, lane1, gen1))
		s.End("unknown")
		if s.Len() != 1 {
			t.Fatal("End of another attempt removed the entry")
		}
		s.End(attA)
		if s.Len() != 0 {
			t.Fatal("entry kept after End")
		}
		if _, err := s.Record(lane1, gen1, pay(jobA, attA, StageAnalyzing)); err != ErrStale {
			t.Fatalf("record after End: %v", err)
		}
	})
	t.Run("disconnect", func(t *testing.T) {
		s := NewStore(c.now)
		mustBegin(t, s, lease(c, jobA, attA, lane1, gen1))
		s.DropConnection(lane1, gen2)
		s.DropConnection("worker-9", gen1)
		if s.Len() != 1 {
			t.Fatal("another connection's disconnect removed the entry")
		}
		s.DropConnection(lane1, gen1)
		if s.Len() != 0 {
			t.Fatal("entry kept after disconnect")
		}
	})
	t.Run("takeover", func(t *testing.T) {
		s := NewStore(c.now)
		mustBegin(t, s, lease(c, jobA, attA, lane1, gen1))
		// The lane is taken over and the new connection gets another lease;
		// the old connection's disconnect arrives afterwards.
		mustBegin(t, s, lease(c, jobA, "att-2", lane1, gen2))
		s.DropConnection(lane1, gen1)
		if s.Len() != 1 {
			t.Fatalf("len %d", s.Len())
		}
		if _, err := s.Record(lane1, gen1, pay(jobA, attA, StageAnalyzing)); err != ErrStale {
			t.Fatalf("old connection: %v", err)
		}
		if _, err := s.Record(lane1, gen2, pay(jobA, "att-2", StageAnalyzing)); err != nil {
			t.Fatalf("new connection: %v", err)
		}
	})
	t.Run("new lease on the lane", func(t *testing.T) {
		s := NewStore(c.now)
		mustBegin(t, s, lease(c, jobA, attA, lane1, gen1))
		mustBegin(t, s, lease(c, "job-2", "att-2", lane1, gen1))
		if s.Len() != 1 {
			t.Fatalf("len %d", s.Len())
		}
	})
}

func TestStoreEviction(t *testing.T) {
	c := newClock()
	s := NewStore(c.now)
	laneOf := func(i int) string { return fmt.Sprintf("w%d#%d", i/256, i%256) }
	for i := 0; i < MaxEntries; i++ {
		mustBegin(t, s, lease(c, fmt.Sprintf("job-%d", i), fmt.Sprintf("att-%d", i), laneOf(i), gen1))
	}
	if _, err := s.Record(laneOf(0), gen1, pay("job-0", "att-0", StageAnalyzing)); err != nil {
		t.Fatal(err)
	}
	mustBegin(t, s, lease(c, "job-new", "att-new", "new", gen1))
	if s.Len() != MaxEntries {
		t.Fatalf("len %d after one over capacity", s.Len())
	}
	if _, err := s.Record(laneOf(0), gen1, pay("job-0", "att-0", StageEditing)); err != ErrStale {
		t.Fatalf("oldest entry not evicted: %v", err)
	}
	for _, x := range []struct{ job, att, lane string }{{"job-1", "att-1", laneOf(1)}, {"job-new", "att-new", "new"}} {
		if _, err := s.Record(x.lane, gen1, pay(x.job, x.att, StageAnalyzing)); err != nil {
			t.Fatalf("%s evicted: %v", x.att, err)
		}
	}

	// An expired entry goes before the oldest live one.
	s2 := NewStore(c.now)
	for i := 0; i < MaxEntries; i++ {
		l := lease(c, fmt.Sprintf("job-%d", i), fmt.Sprintf("att-%d", i), laneOf(i), gen1)
		if i == 500 {
			l.Deadline = c.now().Add(time.Second)
		}
		mustBegin(t, s2, l)
	}
	c.add(2 * time.Second)
	mustBegin(t, s2, lease(c, "job-new", "att-new", "new", gen1))
	if _, err := s2.Record(laneOf(0), gen1, pay("job-0", "att-0", StageAnalyzing)); err != nil {
		t.Fatalf("oldest live entry evicted although one had expired: %v", err)
	}
	if s2.Len() != MaxEntries {
		t.Fatalf("len %d", s2.Len())
	}
}

// TestStoreConcurrent runs leases, records, reads and removals from many
// goroutines (meaningful under -race) and then checks the invariants.
func TestStoreConcurrent(t *testing.T) {
	c := newClock()
	s := NewStore(c.now)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			<-start
			for i := 0; i < 200; i++ {
				lane := fmt.Sprintf("w%d#%d", g, i%4)
				att := fmt.Sprintf("att-%d-%d", g, i)
				s.Begin(lease(c, "job-c", att, lane, gen1))
				for _, st := range Stages() {
					_, _ = s.Record(lane, gen1, pay("job-c", att, st))
				}
				_ = s.Job("job-c")
				if i%3 == 0 {
					s.End(att)
				}
				if i%5 == 0 {
					s.DropConnection(lane, gen1)
				}
			}
		}(g)
	}
	close(start)
	wg.Wait()
	if s.Len() > 8*4 {
		t.Fatalf("%d entries for 32 lanes", s.Len())
	}
	perAttempt := map[string][]Stage{}
	for _, ev := range s.Snapshot() {
		perAttempt[ev.AttemptID] = append(perAttempt[ev.AttemptID], ev.Stage)
	}
	for att, st := range perAttempt {
		if len(st) > MaxEvents {
			t.Fatalf("%s: %d events", att, len(st))
		}
		for i := 1; i < len(st); i++ {
			if st[i].Rank() <= st[i-1].Rank() {
				t.Fatalf("%s: %v", att, st)
			}
		}
	}
}
