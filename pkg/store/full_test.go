package store

import (
	"context"
	"testing"
	"time"
)

// ExtendLeases renews the deadline of attempts leased to a live lane
// generation (to now + TTL, never shortening), and leaves alone those of a
// disconnected lane and those that already run long enough.
func TestExtendLeases(t *testing.T) {
	s, _ := openFile(t)
	ctx := context.Background()
	mustSubmit(t, s, textJob("job-live", 3), t0)
	mustSubmit(t, s, textJob("job-gone", 3), t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	live := mustLease(t, s, "worker-1", gen(1), t0)
	if err := s.ConnectLane(ctx, "worker-1#1", "worker-1", 1, gen(2), t0); err != nil {
		t.Fatal(err)
	}
	gone := mustLease(t, s, "worker-1#1", gen(2), t0)
	if _, err := s.DisconnectLane(ctx, "worker-1#1", gen(2), t0); err != nil {
		t.Fatal(err)
	}
	// 40 s later both deadlines (t0 + 30 s) have passed; nothing swept yet.
	now := t0.Add(40 * time.Second)
	n, err := s.ExtendLeases(ctx, now)
	if err != nil || n != 1 {
		t.Fatalf("ExtendLeases = %d, %v; want 1", n, err)
	}
	d, err := s.Heartbeat(ctx, fenceOf(live, "worker-1", gen(1)), now.Add(time.Second))
	if err != nil {
		t.Fatalf("heartbeat after the extension: %v", err)
	}
	if want := now.Add(31 * time.Second); !d.Equal(want) {
		t.Fatalf("deadline %v, want %v", d, want)
	}
	if n, err := s.ExtendLeases(ctx, now); err != nil || n != 0 {
		t.Fatalf("second ExtendLeases = %d, %v; want 0 (never shortens, nothing due)", n, err)
	}
	res, err := s.Sweep(ctx, now)
	if err != nil || len(res.Expired) != 1 || res.Expired[0].AttemptID != gone.AttemptID {
		t.Fatalf("sweep = %+v, %v; want only the disconnected lane's attempt expired", res, err)
	}
}
