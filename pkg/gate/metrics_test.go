package gate

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/metrics"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// scrape fetches /metrics with the owner token and parses it strictly.
func (tg *testGate) scrape() []metrics.Family {
	tg.t.Helper()
	req, err := http.NewRequest("GET", "http://"+tg.addr+"/metrics", nil)
	if err != nil {
		tg.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testOwnerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tg.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tg.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
		tg.t.Fatalf("scrape: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	fams, err := metrics.Parse(body)
	if err != nil {
		tg.t.Fatalf("scrape does not parse: %v\n%s", err, body)
	}
	return fams
}

// series returns the value of the sample name{labels} (labels as
// name=value pairs, in any order); it fails the test when there is none.
func series(t testing.TB, fams []metrics.Family, name string, labels ...string) float64 {
	t.Helper()
	v, ok := lookup(fams, name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

func lookup(fams []metrics.Family, name string, labels ...string) (float64, bool) {
	for _, f := range fams {
		for _, s := range f.Samples {
			if s.Name != name || len(s.Labels) != len(labels) {
				continue
			}
			match := true
			for _, want := range labels {
				k, v, _ := strings.Cut(want, "=")
				found := false
				for _, l := range s.Labels {
					if l.Name == k && l.Value == v {
						found = true
					}
				}
				match = match && found
			}
			if match {
				return s.Value, true
			}
		}
	}
	return 0, false
}

// TestMetricsScrape scrapes a real Gate with jobs in every live status
// and one lane, parses the text strictly and checks the values.
func TestMetricsScrape(t *testing.T) {
	cfg, sec := testConfig(t, func(m map[string]any) {
		m["free_space_floor_bytes"] = 8 << 20
		m["workers"] = append(m["workers"].([]any), map[string]any{"id": "worker-2", "pool": "batch", "token_env": "W2", "concurrency": 1})
	})
	clk := newClock()
	fs := &fakeSpace{free: 100 << 20, total: 1 << 30}
	// Replicated (async): Litestream last synced the replica 1.5 s before
	// the scrape.
	db := filepath.Join(t.TempDir(), "state", "forge.db")
	ls := startFakeLitestream(t, db, clk.Now().Add(3500*time.Millisecond))
	st, err := store.OpenReplicated(context.Background(), db, store.Replication{Mode: store.ReplicationAsync, Socket: ls.socket})
	if err != nil {
		t.Fatal(err)
	}
	tg := startGateOn(t, cfg, sec, db, st, clk.Now, discardWriter{}, func(g *Gate) { g.storage.src = fs })
	tg.clock = clk

	// Refused without the owner token, with a Worker's, and for a POST.
	for _, tok := range []string{"", testWorkerToken} {
		if code, body := tg.api("GET", "/metrics", tok, nil); code != http.StatusUnauthorized || !contains(body, `"unauthorized"`) {
			t.Fatalf("token %q: %d %s", tok, code, body)
		}
	}
	if code, _ := tg.api("POST", "/metrics", testOwnerToken, nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", code)
	}

	j1 := tg.submit(`{"input":"one"}`)
	j2 := tg.submit(`{"input":"two"}`)
	clk.Advance(2 * time.Second)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	l1 := w.lease() // j1 waited 2 s
	if l1.JobID != j1.ID {
		t.Fatalf("leased %s", l1.JobID)
	}
	wantAck(t, w.textResult(l1, "ONE"))
	l2 := w.lease() // j2 waited 2 s
	if l2.JobID != j2.ID {
		t.Fatalf("leased %s", l2.JobID)
	}
	wantAck(t, w.failResult(l2, wire.FailureExecution)) // retry_wait
	tg.waitJob(j2.ID, "retry_wait")
	j3 := tg.submit(`{"input":"three"}`) // leased at once to the idle lane: waited 0 s
	if l3 := w.lease(); l3.JobID != j3.ID {
		t.Fatalf("leased %s", l3.JobID)
	}
	tg.submit(`{"input":"four"}`) // pending
	clk.Advance(3 * time.Second)

	fams := tg.scrape()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"forge_jobs", []string{"status=pending"}, 1},
		{"forge_jobs", []string{"status=leased"}, 1},
		{"forge_jobs", []string{"status=retry_wait"}, 1},
		{"forge_jobs", []string{"status=delivering"}, 0},
		{"forge_queue_depth", []string{"pool=coding"}, 2},
		{"forge_queue_depth", []string{"pool=batch"}, 0},
		{"forge_queue_oldest_age_seconds", []string{"pool=coding"}, 5}, // j2, submitted 5 s ago
		{"forge_queue_oldest_age_seconds", []string{"pool=batch"}, 0},
		{"forge_submit_to_lease_seconds_bucket", []string{"le=0.001"}, 1},
		{"forge_submit_to_lease_seconds_bucket", []string{"le=1"}, 1},
		{"forge_submit_to_lease_seconds_bucket", []string{"le=5"}, 3},
		{"forge_submit_to_lease_seconds_count", nil, 3},
		{"forge_submit_to_lease_seconds_sum", nil, 4},
		{"forge_jobs_submitted_total", nil, 4},
		{"forge_attempts_leased_total", nil, 3},
		{"forge_jobs_finished_total", []string{"status=succeeded"}, 1},
		{"forge_attempts_finished_total", []string{"outcome=succeeded"}, 1},
		{"forge_attempts_finished_total", []string{"outcome=failed", "code=execution_failed"}, 1},
		{"forge_lanes_connected", []string{"pool=coding"}, 1},
		{"forge_lanes_connected", []string{"pool=batch"}, 0},
		{"forge_storage_full", nil, 0},
		{"forge_storage_free_bytes", nil, 100 << 20},
		{"forge_storage_floor_bytes", nil, 8 << 20},
		{"forge_replication_enabled", nil, 1},
		{"forge_replication_lag_seconds", nil, 1.5},
		{"forge_deliveries", []string{"phase=ci"}, 0},
	} {
		if got := series(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := lookup(fams, "forge_jobs_finished_total", "status=failed"); ok {
		t.Error("a failed job counted")
	}
	commits := series(t, fams, "forge_store_commits_total")
	if commits < 8 || series(t, fams, "forge_store_commit_seconds_count") != commits ||
		series(t, fams, "forge_store_batch_operations_count") != commits ||
		series(t, fams, "forge_store_batch_operations_sum") != series(t, fams, "forge_store_operations_total") {
		t.Errorf("store counters disagree: %v commits", commits)
	}
	if _, ok := lookup(fams, "forge_github_rate_limit_remaining", "budget=unauthenticated"); ok {
		t.Error("GitHub budgets without delivery")
	}

	// Litestream not answering: still replicated, the lag unknown.
	ls.srv.Close()
	fams = tg.scrape()
	if _, ok := lookup(fams, "forge_replication_lag_seconds"); ok || series(t, fams, "forge_replication_enabled") != 1 {
		t.Error("a lag shown while Litestream does not answer")
	}

	// storage_full shows at once; the free space at the next reading.
	fs.set(1 << 20)
	tg.waitReadyz(http.StatusServiceUnavailable)
	fams = tg.scrape()
	if series(t, fams, "forge_storage_full") != 1 || series(t, fams, "forge_storage_free_bytes") != 1<<20 {
		t.Error("storage_full not shown")
	}
}

// fakeLitestream serves Litestream's GET /list on a UNIX socket: one
// database, replicating, last synced at lastSync.
type fakeLitestream struct {
	socket string
	srv    *http.Server
}

func startFakeLitestream(t *testing.T, db string, lastSync time.Time) *fakeLitestream {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "litestream.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeLitestream{socket: sock, srv: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/list" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"databases": []map[string]any{
			{"path": db, "status": "replicating", "last_sync_at": lastSync.Format(time.RFC3339Nano)}}})
	})}}
	go f.srv.Serve(ln)
	t.Cleanup(func() { f.srv.Close() })
	return f
}

// TestMetricsWithoutReplication: the replication gauges read 0.
func TestMetricsWithoutReplication(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	fams := tg.scrape()
	if series(t, fams, "forge_replication_enabled") != 0 || series(t, fams, "forge_replication_lag_seconds") != 0 {
		t.Fatal("replication shown as on")
	}
	if v := series(t, fams, "forge_queue_oldest_age_seconds", "pool=coding"); v != 0 || math.Signbit(v) {
		t.Fatalf("empty queue age %v", v)
	}
}
