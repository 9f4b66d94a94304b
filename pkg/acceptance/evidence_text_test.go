package acceptance

import "testing"

// TestEvidenceOnTextAttemptIsInvalid (F2): evidence belongs to coding
// attempts; a batch for a held text attempt is refused and nothing stored.
func TestEvidenceOnTextAttemptIsInvalid(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	w, _ := g.lane(t, 0, 0)
	id := g.submit(t, `{"input":"text job"}`)
	e := w.recv(t)
	att := e.Lease.AttemptID
	w.sendText(t, `{"type":"evidence","seq":1,"evidence":{"job_id":"`+id+`","attempt_id":"`+att+`","batch":1,"records":[{"phase":"workspace_validation","reason":"empty_change"}]}}`)
	if r := w.recv(t); r.Type != "reject" || r.Seq != 1 || r.Reject.Code != "invalid" {
		t.Fatalf("evidence on a text attempt: %+v", r)
	}
	w.sendJSON(t, resultMsg(2, id, att, "TEXT JOB"))
	if r := w.recv(t); r.Type != "ack" {
		t.Fatalf("result: %+v", r)
	}
	if a := g.aggregate(t, id); len(a.Attempts[0].Evidence) != 0 {
		t.Fatalf("evidence stored on a text attempt: %+v", a.Attempts[0])
	}
}
