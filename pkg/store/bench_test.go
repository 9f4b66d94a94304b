package store

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBareCommit is the disk's physical limit: a plain SQLite loop on
// a file database (WAL, synchronous=FULL), one INSERT per transaction.
func BenchmarkBareCommit(b *testing.B) {
	path := filepath.Join(privateDir(b), "bare.db")
	db, err := sql.Open("sqlite", fileURI(path)+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec("INSERT INTO t (v) VALUES (?)", "row"); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
}

// BenchmarkSubmitGroupCommit measures durable submits through the
// group-commit writer with 16 concurrent submitters.
func BenchmarkSubmitGroupCommit(b *testing.B) {
	s, _ := openFile(b)
	const submitters = 16
	var next atomic.Int64
	var wg sync.WaitGroup
	before := s.Stats()
	b.ResetTimer()
	start, cpu := time.Now(), processCPU()
	for g := 0; g < submitters; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := s.Submit(bg, textJob(fmt.Sprintf("j%d", i), 1), t0); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	st := s.Stats()
	commits := float64(st.Commits - before.Commits)
	b.ReportMetric(float64(b.N)/elapsed, "submits/s")
	b.ReportMetric(commits/elapsed, "commits/s")
	b.ReportMetric(float64(st.Operations-before.Operations)/commits, "ops/commit")
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
}

// BenchmarkStoreJobs is the store's share of benchmark (c): 16 submitters
// and 8 lanes, each job = submit + lease + complete, all durable. Lanes
// are woken by one token per submitted job (push, no polling).
func BenchmarkStoreJobs(b *testing.B) {
	s, _ := openFile(b)
	const submitters, lanes = 16, 8
	ready := make(chan struct{}, b.N)
	for l := 0; l < lanes; l++ {
		if err := s.ConnectLane(bg, fmt.Sprintf("worker-1#%d", l+1), "worker-1", l+1, gen(l), t0); err != nil {
			b.Fatal(err)
		}
	}
	before := s.Stats()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu := time.Now(), processCPU()
	for g := 0; g < submitters; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := s.Submit(bg, textJob(fmt.Sprintf("j%d", i), 1), t0); err != nil {
					b.Error(err)
					return
				}
				ready <- struct{}{}
			}
		}()
	}
	for l := 0; l < lanes; l++ {
		wg.Add(1)
		go func(l int) {
			defer wg.Done()
			lane, g := fmt.Sprintf("worker-1#%d", l+1), gen(l)
			for done.Add(1) <= int64(b.N) {
				<-ready
				ls, err := s.Lease(bg, lane, g, "coding", []string{"reference"}, nil, t0)
				if err != nil || ls == nil {
					b.Errorf("lease: %v %v", ls, err)
					return
				}
				if _, err := s.Complete(bg, fenceOf(ls, lane, g), textOK("ok"), t0); err != nil {
					b.Error(err)
					return
				}
			}
		}(l)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	st := s.Stats()
	commits := float64(st.Commits - before.Commits)
	b.ReportMetric(float64(b.N)/elapsed, "jobs/s")
	b.ReportMetric(commits/elapsed, "commits/s")
	b.ReportMetric(float64(b.N)/commits, "jobs/commit")
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/job")
}

// BenchmarkStoreJobsCombined is BenchmarkStoreJobs with each lane
// recording its result and taking its next lease in one transaction
// (CompleteAndLease), as a Gate can when a result arrives.
func BenchmarkStoreJobsCombined(b *testing.B) {
	s, _ := openFile(b)
	const submitters, lanes = 16, 8
	ready := make(chan struct{}, b.N)
	finished := make(chan struct{})
	for l := 0; l < lanes; l++ {
		if err := s.ConnectLane(bg, fmt.Sprintf("worker-1#%d", l+1), "worker-1", l+1, gen(l), t0); err != nil {
			b.Fatal(err)
		}
	}
	before := s.Stats()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu := time.Now(), processCPU()
	for g := 0; g < submitters; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := s.Submit(bg, textJob(fmt.Sprintf("j%d", i), 1), t0); err != nil {
					b.Error(err)
					return
				}
				ready <- struct{}{}
			}
		}()
	}
	for l := 0; l < lanes; l++ {
		wg.Add(1)
		go func(l int) {
			defer wg.Done()
			req := LeaseRequest{Lane: fmt.Sprintf("worker-1#%d", l+1), Generation: gen(l), Pool: "coding", Plugins: []string{"reference"}}
			var ls *Lease
			for {
				if ls == nil {
					select {
					case <-ready:
					case <-finished:
						return
					}
					var err error
					if ls, err = s.Lease(bg, req.Lane, req.Generation, req.Pool, req.Plugins, nil, t0); err != nil {
						b.Error(err)
						return
					}
					continue
				}
				_, nl, err := s.CompleteAndLease(bg, fenceOf(ls, req.Lane, req.Generation), textOK("ok"), req, t0)
				if err != nil {
					b.Error(err)
					return
				}
				ls = nl
				if done.Add(1) == int64(b.N) {
					close(finished)
				}
			}
		}(l)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	st := s.Stats()
	commits := float64(st.Commits - before.Commits)
	b.ReportMetric(float64(b.N)/elapsed, "jobs/s")
	b.ReportMetric(commits/elapsed, "commits/s")
	b.ReportMetric(float64(b.N)/commits, "jobs/commit")
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/job")
}

// BenchmarkCompleteAndLeaseSerial is one lane working through a backlog:
// each CompleteAndLease records a result and leases the next job in its
// own commit, as a Gate with a single busy lane does. cpu-us/job is this
// process's CPU per job (the commit included).
func BenchmarkCompleteAndLeaseSerial(b *testing.B) {
	s, _ := openFile(b)
	const lane = "worker-1#1"
	if err := s.ConnectLane(bg, lane, "worker-1", 1, gen(0), t0); err != nil {
		b.Fatal(err)
	}
	for i := 0; i <= b.N; i++ {
		if _, err := s.Submit(bg, textJob(fmt.Sprintf("j%d", i), 1), t0); err != nil {
			b.Fatal(err)
		}
	}
	req := LeaseRequest{Lane: lane, Generation: gen(0), Pool: "coding", Plugins: []string{"reference"}}
	ls, err := s.Lease(bg, req.Lane, req.Generation, req.Pool, req.Plugins, nil, t0)
	if err != nil || ls == nil {
		b.Fatalf("first lease: %v %v", ls, err)
	}
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		if _, ls, err = s.CompleteAndLease(bg, fenceOf(ls, req.Lane, req.Generation), textOK("ok"), req, t0); err != nil || ls == nil {
			b.Fatalf("job %d: %v %v", i, ls, err)
		}
	}
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/job")
}
