package store

import (
	"context"
	"testing"
)

func TestSmoke(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	mustSubmit(t, s, textJob("j1", 3), t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	c, err := s.Complete(ctx, fenceOf(l, "worker-1", gen(1)), textOK("HELLO"), t0)
	if err != nil || c.JobStatus != JobSucceeded {
		t.Fatalf("%v %+v", err, c)
	}
	a, err := s.Aggregate(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", a)
}
