package gate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// TestEvidenceContractEnforced: Gate stores only batches that follow the
// evidence contract (pkg/evidence) and answers anything else with
// reject invalid, storing nothing.
func TestEvidenceContractEnforced(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), []string{"agent-forge"})
	job := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Fix it.","tests":[["make"]]}`)
	l := w.lease()
	if l.DefaultBranch != "main" {
		t.Fatalf("coding lease names default branch %q, want the configured main", l.DefaultBranch)
	}
	ev := func(batch int, recs ...string) wire.Envelope {
		raw := make([]json.RawMessage, len(recs))
		for i, r := range recs {
			raw[i] = json.RawMessage(r)
		}
		return w.request(wire.Envelope{Type: wire.TypeEvidence, Evidence: &wire.Evidence{JobID: l.JobID, AttemptID: l.AttemptID, Batch: batch, Records: raw}})
	}
	check := `{"phase":"scoped_check","reason":"failed","index":0,"sha":"` + testSHA + `","exit_code":1,"duration_ms":3,"arg_count":1,"args":["[REDACTED]"],"output":"[REDACTED]","output_redacted":true,"output_truncated":false}`
	passed := strings.NewReplacer(`"reason":"failed"`, `"reason":"passed"`, `"exit_code":1`, `"exit_code":0`).Replace(check)
	for name, recs := range map[string][]string{
		"arg count":       {strings.Replace(check, `"arg_count":1,"args":["[REDACTED]"]`, `"arg_count":2,"args":["[REDACTED]","[REDACTED]"]`, 1)},
		"extra check":     {passed, strings.Replace(check, `"index":0`, `"index":1`, 1)},
		"base candidate":  {passed, `{"phase":"candidate_commit","reason":"created","sha":"` + testSHA + `"}`},
		"raw output":      {strings.Replace(check, `"output":"[REDACTED]"`, `"output":"sk-secret"`, 1)},
		"raw argument":    {strings.Replace(check, `["[REDACTED]"]`, `["--token=sk-secret"]`, 1)},
		"unknown field":   {strings.Replace(check, `"phase"`, `"stdout":"x","phase"`, 1)},
		"unknown phase":   {`{"phase":"review","reason":"failed"}`},
		"unknown reason":  {`{"phase":"plugin","reason":"late"}`},
		"mixed purpose":   {`{"phase":"plugin","reason":"failed"}`, `{"phase":"cleanup","reason":"cleanup_failed"}`},
		"oversized":       {`{"phase":"plugin","reason":"failed","pad":"` + strings.Repeat("x", 97<<10) + `"}`},
		"check after end": {`{"phase":"plugin","reason":"failed"}`, check},
		"not the base":    {strings.Replace(check, testSHA, strings.Repeat("c", 40), 1)},
	} {
		t.Run(name, func(t *testing.T) { wantReject(t, ev(1, recs...), wire.RejectInvalid) })
	}
	wantReject(t, ev(2, `{"phase":"cleanup","reason":"cleanup_failed"}`), wire.RejectInvalid) // out of order
	wantAck(t, ev(1, check))
	wantAck(t, ev(1, strings.Replace(check, `"phase":"scoped_check",`, `"phase": "scoped_check" ,`, 1))) // same canonical record
	wantReject(t, ev(1, strings.Replace(check, `"exit_code":1`, `"exit_code":2`, 1)), wire.RejectConflict)
	wantReject(t, ev(2, check), wire.RejectInvalid) // batch 2 is cleanup only
	wantAck(t, ev(2, `{"phase":"cleanup","reason":"cleanup_failed"}`))
	res := wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID,
		Outcome: wire.OutcomeFailed, Disposition: wire.DispositionTerminal, FailureCode: wire.FailureScopedTestFailed}}
	wantAck(t, w.request(res))
	// After the attempt is over, any batch for it is stale, even a malformed one.
	wantReject(t, ev(1, `{"phase":"plugin","reason":"late"}`), wire.RejectStale)
	wantReject(t, ev(2, `{"phase":"cleanup","reason":"cleanup_failed"}`), wire.RejectStale)
	code, body := tg.api("GET", "/v1/jobs/"+job.ID+"/aggregate", testOwnerToken, nil)
	if code != 200 {
		t.Fatal(code)
	}
	if strings.Contains(string(body), "sk-secret") || strings.Contains(string(body), "pad") {
		t.Fatalf("a rejected record was stored: %s", body)
	}
	var agg struct {
		Attempts []struct {
			Evidence []json.RawMessage `json:"evidence"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(body, &agg); err != nil {
		t.Fatal(err)
	}
	if ev := agg.Attempts[0].Evidence; len(ev) != 2 || string(ev[0]) != check {
		t.Fatalf("stored evidence %s", ev)
	}
}
