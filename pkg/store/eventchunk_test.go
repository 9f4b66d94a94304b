package store

import "testing"

// Events queued in one transaction are inserted in order through the
// cached chunked INSERTs, whatever their count (150 = 64+64+22).
func TestEventChunksKeepOrder(t *testing.T) {
	s, _ := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	total := 1 // the submitted event
	for round, n := range []int{150, 3, 64} {
		evs := make([]ev, n)
		for i := range evs {
			evs[i] = ev{typ: EventLeased, attempt: i + 1}
		}
		last := int64(total + n)
		if err := s.w.do(bg, func(tx *wtx) error {
			var seq int64
			if err := tx.queryRow(`SELECT seq FROM jobs WHERE id = ?`, "j1").Scan(&seq); err != nil {
				return err
			}
			tx.events(seq, last, t0.UnixMicro(), evs...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Events(bg, "j1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != total+n {
			t.Fatalf("round %d: %d events, want %d", round, len(got), total+n)
		}
		for i, e := range got[total:] {
			if e.Seq != total+i+1 || e.Type != EventLeased || e.Attempt != i+1 {
				t.Fatalf("round %d: event %d is %+v", round, i, e)
			}
		}
		total += n
	}
}

// An event for a job that does not exist fails its transaction at COMMIT
// (the events' foreign key is deferred) and leaves nothing behind.
func TestEventForeignKeyDeferred(t *testing.T) {
	s, _ := openFile(t)
	err := s.w.do(bg, func(tx *wtx) error {
		if _, err := tx.exec(`INSERT INTO lanes (lane, worker_id, slot, generation, connected, connected_at)
VALUES ('l', 'w', 0, 'g', 1, 0)`); err != nil {
			return err
		}
		tx.events(12345, 2, t0.UnixMicro(), ev{typ: EventLeased, attempt: 1}, ev{typ: EventReleased, attempt: 1})
		return nil
	})
	if err == nil {
		t.Fatal("events of a missing job committed")
	}
	var n int
	if err := s.read(bg, func(q querier) error {
		return q.QueryRowContext(bg, `SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM lanes)`).Scan(&n)
	}); err != nil || n != 0 {
		t.Fatalf("rows left: %d %v", n, err)
	}
}
