package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const openBasesPath = "/srv/forge/public/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.git"

// fullScanBases is what OpenBases answered before it read the indexes:
// every job of the repository, finished or not, looked at.
const fullScanBases = `SELECT DISTINCT base_sha FROM jobs WHERE prepared_path = ? AND base_sha IS NOT NULL
  AND status <> 'succeeded' AND status <> 'failed'`

func baseOf(i int) string { return fmt.Sprintf("%040x", i) }

// openBasesWorld holds one job of the repository in each state (bases 1
// to 6: pending, leased, retry_wait, delivering, succeeded, failed) and
// one pending job of another repository (base 7).
func openBasesWorld(tb testing.TB, s *Store) {
	tb.Helper()
	job := func(id string, base, attempts int, path string, deliver bool) NewJob {
		j := NewJob{ID: id, Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo", PreparedPath: path,
			BaseSHA: baseOf(base), Policy: testPolicy(time.Minute, time.Second, attempts, "reference")}
		if deliver {
			j.Delivery = &DeliveryTarget{Owner: "octo", Repo: "project", BaseBranch: "main"}
		}
		return j
	}
	lease := func(lane int) Fence {
		mustConnect(tb, s, "worker-"+fmt.Sprint(lane), gen(lane), t0)
		l, err := s.Lease(bg, "worker-"+fmt.Sprint(lane), gen(lane), "coding", []string{"reference"}, []string{"repo"}, t0)
		if err != nil || l == nil {
			tb.Fatal(l, err)
		}
		return fenceOf(l, "worker-"+fmt.Sprint(lane), gen(lane))
	}
	complete := func(f Fence, o Outcome, want string) {
		if c, err := s.Complete(bg, f, o, t0.Add(time.Second)); err != nil || c.JobStatus != want {
			tb.Fatalf("complete %s: %+v %v, want %s", f.JobID, c, err, want)
		}
	}
	candidate := func(f Fence) {
		if _, err := s.AddEvidence(bg, f, 1, []json.RawMessage{json.RawMessage(`{"phase":"candidate_commit"}`)}, deliverSHA, t0); err != nil {
			tb.Fatal(err)
		}
	}
	mustSubmit(tb, s, job("leased", 2, 1, openBasesPath, false), t0)
	lease(1)
	mustSubmit(tb, s, job("retry", 3, 2, openBasesPath, false), t0)
	complete(lease(2), retryable(), JobRetryWait)
	mustSubmit(tb, s, job("delivering", 4, 1, openBasesPath, true), t0)
	f := lease(3)
	candidate(f)
	complete(f, Outcome{Succeeded: true, CandidateSHA: deliverSHA}, JobDelivering)
	mustSubmit(tb, s, job("succeeded", 5, 1, openBasesPath, false), t0)
	f = lease(4)
	candidate(f)
	complete(f, Outcome{Succeeded: true, CandidateSHA: deliverSHA}, JobSucceeded)
	mustSubmit(tb, s, job("failed", 6, 1, openBasesPath, false), t0)
	complete(lease(5), retryable(), JobFailed)
	mustSubmit(tb, s, job("pending", 1, 1, openBasesPath, false), t0)
	mustSubmit(tb, s, job("elsewhere", 7, 1, "/srv/forge/public/other.git", false), t0)
}

// OpenBases answers exactly the bases of the repository's live jobs, as
// the full scan did.
func TestOpenBasesLiveJobs(t *testing.T) {
	s := mustOpen(t, ":memory:")
	openBasesWorld(t, s)
	got, err := s.OpenBases(bg, openBasesPath)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{baseOf(1), baseOf(2), baseOf(3), baseOf(4)}; !slices.Equal(got, want) {
		t.Fatalf("open bases %v, want %v", got, want)
	}
	var scan []string
	if err := s.read(bg, func(q querier) error {
		rows, err := q.QueryContext(bg, fullScanBases, openBasesPath)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b string
			rows.Scan(&b)
			scan = append(scan, b)
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(scan)
	if !slices.Equal(got, scan) {
		t.Fatalf("open bases %v, the full scan %v", got, scan)
	}
}

// The plan reads the three partial indexes and no table whole.
func TestOpenBasesPlan(t *testing.T) {
	s := mustOpen(t, ":memory:")
	var plan []string
	if err := s.read(bg, func(q querier) error {
		rows, err := q.QueryContext(bg, "EXPLAIN QUERY PLAN "+openBasesQuery, openBasesPath)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				return err
			}
			plan = append(plan, detail)
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(plan, "\n")
	for _, idx := range []string{"jobs_ready", "attempts_leased", "deliveries_active"} {
		if !strings.Contains(all, "INDEX "+idx) {
			t.Errorf("the plan does not use %s:\n%s", idx, all)
		}
	}
	for _, l := range plan {
		if strings.HasPrefix(l, "SCAN ") && !strings.Contains(l, "USING") {
			t.Errorf("the plan scans a table whole: %q\n%s", l, all)
		}
	}
}

// BenchmarkOpenBases reads the open bases of a repository whose 10,000
// finished jobs each left a candidate ref (and 6 live jobs): index, the
// union of the live rows' partial indexes (OpenBases); scan, the full
// scan of every job it replaced. A maintenance round reads them once per
// page of 10,000 candidate refs and once for the pins.
//
// Run with go test -run '^$' -bench OpenBases ./pkg/store.
func BenchmarkOpenBases(b *testing.B) {
	s, _ := openFile(b)
	openBasesWorld(b, s)
	ctx := context.Background()
	if err := s.w.submit(ctx, &op{ctx: ctx, done: make(chan error, 1), fn: func(t *wtx) error {
		if _, err := t.exec(`CREATE TEMP TABLE tpl AS SELECT * FROM jobs WHERE id = 'succeeded'`); err != nil {
			return err
		}
		for i := range 10_000 {
			if _, err := t.exec(`UPDATE tpl SET seq = NULL, id = ?, base_sha = ?`, fmt.Sprintf("done%05d", i), baseOf(100+i)); err != nil {
				return err
			}
			if _, err := t.exec(`INSERT INTO jobs SELECT * FROM tpl`); err != nil {
				return err
			}
		}
		_, err := t.exec(`DROP TABLE tpl`)
		return err
	}}); err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct{ name, sql string }{{"index", openBasesQuery}, {"scan", fullScanBases}} {
		b.Run(q.name, func(b *testing.B) {
			for range b.N {
				n := 0
				if err := s.read(ctx, func(qr querier) error {
					rows, err := qr.QueryContext(ctx, q.sql, openBasesPath)
					if err != nil {
						return err
					}
					defer rows.Close()
					for rows.Next() {
						n++
					}
					return rows.Err()
				}); err != nil || n != 4 {
					b.Fatalf("%d bases, %v", n, err)
				}
			}
		})
	}
}
