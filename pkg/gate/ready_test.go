package gate

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Before the startup sweep the debug reads answer not_ready (after the
// owner check), so a lane left connected by the previous process is never
// shown as connected; afterwards they show it disconnected.
func TestDebugRoutesNotReadyBeforeStartup(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state", "forge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := newClock()
	if err := st.ConnectLane(context.Background(), "worker-1", "worker-1", 0, strings.Repeat("ab", 16), clk.Now()); err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, sec, st, discardLog(), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	h := g.Handler()
	get := func(path, tok string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, path := range []string{"/v1/debug/workers", "/v1/debug/jobs", "/v1/debug/jobs/abc", "/v1/debug/jobs/abc/activity"} {
		if rec := get(path, testOwnerToken); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"not_ready"`) {
			t.Fatalf("%s before start: %d %s", path, rec.Code, rec.Body)
		}
		if rec := get(path, ""); rec.Code != http.StatusUnauthorized {
			t.Fatalf("%s without a token before start: %d", path, rec.Code)
		}
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := get("/v1/debug/workers", testOwnerToken)
	var page struct {
		Lanes []struct {
			Lane      string `json:"lane"`
			Connected bool   `json:"connected"`
		} `json:"lanes"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != http.StatusOK || len(page.Lanes) != 1 || page.Lanes[0].Connected {
		t.Fatalf("after start: %d %s", rec.Code, rec.Body)
	}
}

// The debug job record carries the coding job's exact base SHA.
func TestDebugJobShowsBaseSHA(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	job := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Fix it."}`)
	for _, path := range []string{"/v1/debug/jobs/" + job.ID, "/v1/debug/jobs"} {
		if code, body := tg.api("GET", path, testOwnerToken, nil); code != http.StatusOK || !contains(body, `"base_sha":"`+testSHA+`"`) {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
}

// A store read that fails behind a debug route is answered unavailable and
// stops the Gate, like any other store failure.
func TestDebugStoreFailureStopsGate(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	db, err := sql.Open("sqlite", tg.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`ALTER TABLE lanes RENAME TO lanes_gone`); err != nil {
		t.Fatal(err)
	}
	if code, body := tg.api("GET", "/v1/debug/workers", testOwnerToken, nil); code != http.StatusServiceUnavailable || !contains(body, `"unavailable"`) {
		t.Fatalf("debug read on a broken store: %d %s", code, body)
	}
	select {
	case err := <-tg.done:
		if err == nil || !strings.Contains(err.Error(), "store failure") {
			t.Fatalf("gate stopped with %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("gate kept serving after a debug read failed")
	}
	tg.cancel = nil
	tg.st.Close()
}

// The evidence handler's job read and the candidate cross-check take the
// store-failure path: the Worker is answered unavailable and the Gate
// stops (never "invalid" while it keeps serving).
func TestLaneStoreReadFailureStopsGate(t *testing.T) {
	for name, send := range map[string]func(w *rawWorker, l *wire.Lease) wire.Envelope{
		"evidence": func(w *rawWorker, l *wire.Lease) wire.Envelope {
			created := `{"phase":"candidate_commit","reason":"created","sha":"` + strings.Repeat("b", 40) + `"}`
			return w.request(wire.Envelope{Type: wire.TypeEvidence, Evidence: &wire.Evidence{JobID: l.JobID, AttemptID: l.AttemptID, Batch: 1,
				Records: []json.RawMessage{json.RawMessage(created)}}})
		},
		"candidate": func(w *rawWorker, l *wire.Lease) wire.Envelope {
			return w.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID,
				Outcome: wire.OutcomeSucceeded, CandidateSHA: strings.Repeat("b", 40)}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, sec := testConfig(t, func(m map[string]any) { m["recovery_interval"] = "1h" })
			tg := startGate(t, cfg, sec, "", nil)
			w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), []string{"agent-forge"})
			tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Fix it."}`)
			l := w.lease()
			db, err := sql.Open("sqlite", tg.db)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`ALTER TABLE jobs RENAME TO jobs_gone`); err != nil {
				t.Fatal(err)
			}
			wantReject(t, send(w, l), wire.RejectUnavailable)
			select {
			case err := <-tg.done:
				if err == nil || !strings.Contains(err.Error(), "store failure") {
					t.Fatalf("gate stopped with %v", err)
				}
			case <-time.After(waitLimit):
				t.Fatal("gate kept serving after a store read failed")
			}
			tg.cancel = nil
			tg.st.Close()
		})
	}
}

// A coding lease carries the default branch resolved at submit: a Gate
// restarted with another default branch configured leases the queued job
// with the old one.
func TestLeaseDefaultBranchFromSubmit(t *testing.T) {
	db := filepath.Join(t.TempDir(), "state", "forge.db")
	cfg, sec := testConfig(t, func(m map[string]any) { repo0(m)["default_branch"] = "main" })
	tg := startGate(t, cfg, sec, db, nil)
	job := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Fix it."}`)
	tg.stop()
	cfg2, sec2 := testConfig(t, func(m map[string]any) { repo0(m)["default_branch"] = "trunk" })
	tg2 := startGate(t, cfg2, sec2, db, nil)
	w := connect(t, tg2.addr, testWorkerToken, "worker-1", 0, plugins(), []string{"agent-forge"})
	l := w.lease()
	if l.JobID != job.ID || l.DefaultBranch != "main" {
		t.Fatalf("lease %s default_branch %q, want main", l.JobID, l.DefaultBranch)
	}
	// A job submitted now gets the new one.
	wantAck(t, w.failResult(l, wire.FailureInvalidBase))
	tg2.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Again."}`)
	if l := w.lease(); l.DefaultBranch != "trunk" {
		t.Fatalf("new job's default_branch %q", l.DefaultBranch)
	}
}
