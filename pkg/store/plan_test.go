package store

import (
	"strings"
	"testing"
)

// TestLeasedAttemptsPlans: the lane busy check, the sweep and the next-due
// read all go through the one partial index of leased attempts, never a
// scan of every attempt.
func TestLeasedAttemptsPlans(t *testing.T) {
	s := mustOpen(t, ":memory:")
	for _, q := range []string{
		`SELECT EXISTS (SELECT 1 FROM attempts WHERE lane = 'l' AND generation = 'g' AND status = 'leased') FROM lanes WHERE lane = 'l'`,
		`SELECT a.job_seq FROM attempts a JOIN jobs j ON j.seq = a.job_seq
WHERE a.status = 'leased' AND a.deadline_at <= 5 ORDER BY a.deadline_at, a.id`,
		nextDueSQL,
	} {
		var plan []string
		err := s.read(bg, func(qq querier) error {
			plan = nil
			rows, err := qq.QueryContext(bg, "EXPLAIN QUERY PLAN "+q)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					return err
				}
				plan = append(plan, detail)
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(plan, "; ")
		if !strings.Contains(all, "attempts_leased") {
			t.Fatalf("plan %q for %s", all, q)
		}
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && !strings.Contains(step, " USING ") {
				t.Fatalf("plan %q for %s", all, q)
			}
		}
	}
}

// TestGaugePlans: every gauge query reads a partial index of live rows (or
// a primary key), never a scan of a table.
func TestGaugePlans(t *testing.T) {
	s := mustOpen(t, ":memory:")
	for q, index := range map[string]string{
		queuesSQL:     "USING INDEX jobs_ready",
		retryWaitSQL:  "USING COVERING INDEX jobs_retry",
		leasedSQL:     "USING COVERING INDEX attempts_leased",
		deliveriesSQL: "USING INDEX deliveries_active",
		createdSQL:    "USING INTEGER PRIMARY KEY",
	} {
		var plan []string
		err := s.read(bg, func(qq querier) error {
			plan = nil
			rows, err := qq.QueryContext(bg, "EXPLAIN QUERY PLAN "+q, 1)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					return err
				}
				plan = append(plan, detail)
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan) != 1 || !strings.Contains(plan[0], index) {
			t.Fatalf("plan %q for %s", plan, q)
		}
	}
}
