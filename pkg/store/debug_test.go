package store

import (
	"errors"
	"testing"
	"time"
)

func TestDebugReads(t *testing.T) {
	s, _ := openFile(t)
	for _, id := range []string{"a", "c", "b"} {
		mustSubmit(t, s, textJob(id, 2), t0)
	}
	mustSubmit(t, s, textJob("newest", 2), t0.Add(time.Second))
	mustSubmit(t, s, NewJob{ID: "code", Kind: KindCoding, Pool: "coding", RepositoryID: "repo", BaseSHA: "0123456789abcdef0123456789abcdef01234567",
		Task:   []byte(`{"repository_id":"repo","base_sha":"0123456789abcdef0123456789abcdef01234567","instruction":"x"}`),
		Policy: testPolicy(time.Minute, time.Second, 1, "reference")}, t0.Add(2*time.Second))

	// Newest first, in submission order, paged by the last id seen.
	var order []string
	after := ""
	for {
		page, err := s.DebugJobs(bg, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, j := range page {
			order = append(order, j.ID)
		}
		after = page[len(page)-1].ID
	}
	if got := join(order); got != "code,newest,b,c,a" {
		t.Fatalf("job order %s", got)
	}
	if page, err := s.DebugJobs(bg, "unknown", 10); err != nil || len(page) != 0 {
		t.Fatalf("after an unknown id: %v %v", page, err)
	}
	j, _, err := s.DebugJob(bg, "code")
	if err != nil || j.BaseSHA != "0123456789abcdef0123456789abcdef01234567" {
		t.Fatalf("debug job %+v %v", j, err)
	}

	mustConnect(t, s, "worker-1", gen(1), t0)
	if err := s.ConnectLane(bg, "worker-1#1", "worker-1", 1, gen(2), t0); err != nil {
		t.Fatal(err)
	}
	l := mustLease(t, s, "worker-1", gen(1), t0.Add(2*time.Second))
	if _, err := s.DisconnectLane(bg, "worker-1#1", gen(2), t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	lanes, err := s.DebugLanes(bg, "", 10)
	if err != nil || len(lanes) != 2 {
		t.Fatalf("lanes %+v %v", lanes, err)
	}
	if lanes[0].Lane != "worker-1" || !lanes[0].Connected || lanes[0].JobID != l.JobID || lanes[0].AttemptID != l.AttemptID {
		t.Fatalf("lane 0 %+v", lanes[0])
	}
	if lanes[1].Lane != "worker-1#1" || lanes[1].Connected || lanes[1].Slot != 1 ||
		!lanes[1].DisconnectedAt.Equal(t0.Add(3*time.Second)) || lanes[1].JobID != "" {
		t.Fatalf("lane 1 %+v", lanes[1])
	}
	if rest, err := s.DebugLanes(bg, "worker-1", 10); err != nil || len(rest) != 1 || rest[0].Lane != "worker-1#1" {
		t.Fatalf("lanes after worker-1: %+v %v", rest, err)
	}

	evs, err := s.DebugEvents(bg, l.JobID, 1, 10)
	if err != nil || len(evs) != 1 || evs[0].Seq != 2 || evs[0].Type != EventLeased || evs[0].Attempt != 1 {
		t.Fatalf("events after 1: %+v %v", evs, err)
	}
	if evs, err := s.DebugEvents(bg, l.JobID, 0, 1); err != nil || len(evs) != 1 || evs[0].Type != EventSubmitted {
		t.Fatalf("first event: %+v %v", evs, err)
	}
	if _, err := s.DebugEvents(bg, "missing", 0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	if _, _, err := s.DebugJob(bg, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
}

func join(ids []string) string {
	out := ""
	for i, id := range ids {
		if i > 0 {
			out += ","
		}
		out += id
	}
	return out
}
