package store

import "testing"

// Events queued in one transaction are inserted in order through the
// cached chunked INSERTs, whatever their count (150 = 64+64+16+4+1+1).
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
