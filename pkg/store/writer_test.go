package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestGroupCommitSavepoints queues three operations behind a blocked one so
// they share one transaction, and checks that the failing middle operation
// rolls back only its own write.
func TestGroupCommitSavepoints(t *testing.T) {
	s, _ := openFile(t)
	started, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.w.do(bg, func(tx *wtx) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	before := s.Stats()
	insert := func(id string, fail bool) *op {
		return &op{ctx: bg, done: make(chan error, 1), fn: func(tx *wtx) error {
			if _, err := tx.exec(`INSERT INTO lanes (lane, worker_id, slot, generation, connected, connected_at)
VALUES (?, 'w', 0, 'g', 1, 0)`, id); err != nil {
				return err
			}
			if fail {
				return errors.New("planned failure")
			}
			return nil
		}}
	}
	ops := []*op{insert("a", false), insert("b", true), insert("c", false)}
	for _, o := range ops {
		s.w.ops <- o // buffered: queued while the writer is busy
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, o := range ops {
		err := <-o.done
		if (i == 1) != (err != nil) {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	after := s.Stats()
	// The blocked op committed alone; the three queued ones shared one
	// transaction that carried two successful operations.
	if after.Commits-before.Commits != 2 || after.Operations-before.Operations != 3 {
		t.Fatalf("stats before %+v after %+v", before, after)
	}
	var lanes []string
	err := s.read(bg, func(q querier) error {
		rows, err := q.QueryContext(bg, "SELECT lane FROM lanes ORDER BY lane")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l string
			rows.Scan(&l)
			lanes = append(lanes, l)
		}
		return rows.Err()
	})
	if err != nil || strings.Join(lanes, ",") != "a,c" {
		t.Fatalf("lanes %v %v", lanes, err)
	}
}

// TestConcurrentWritersAllDurable runs many concurrent submitters and
// checks every acknowledged job is present after a reopen.
func TestConcurrentWritersAllDurable(t *testing.T) {
	s, path := openFile(t)
	const workers, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := s.Submit(bg, textJob(fmt.Sprintf("w%d-%d", w, i), 1), t0)
				errs <- err
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Operations != workers*each || st.Commits < 1 || st.Commits > st.Operations {
		t.Fatalf("stats %+v", st)
	}
	s.Close()
	s = mustOpen(t, path)
	for w := 0; w < workers; w++ {
		for i := 0; i < each; i++ {
			if _, err := s.Job(bg, fmt.Sprintf("w%d-%d", w, i)); err != nil {
				t.Fatalf("acknowledged job missing after reopen: %v", err)
			}
		}
	}
}

const crashEnv = "FORGE_STORE_CRASH_CHILD"

// TestCrashDurability re-executes the test binary as a child that submits
// jobs concurrently and prints each acknowledged id; the parent SIGKILLs it
// mid-stream and requires every acknowledged job after reopening.
func TestCrashDurability(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	dir := privateDir(t)
	path := dir + "/forge.db"
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDurability$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(acked) < 300 {
		if id, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
			acked = append(acked, id)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("child acknowledged only %d jobs", len(acked))
	}
	s := mustOpen(t, path)
	for _, id := range acked {
		j, err := s.Job(bg, id)
		if err != nil || j.Status != JobPending {
			t.Fatalf("acknowledged job %s lost after SIGKILL: %v", id, err)
		}
	}
}

func crashChild(path string) {
	s, err := Open(context.Background(), path)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("c%d-%d", w, i)
				if _, err := s.Submit(context.Background(), textJob(id, 1), t0); err != nil {
					fmt.Println("ERR", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Println("ACK " + id)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
}

// TestCloseAnswersEveryone closes the store under concurrent submits: every
// call returns (nil before the close, ErrClosed after), none hangs, and
// every acknowledged job is present after reopening.
func TestCloseAnswersEveryone(t *testing.T) {
	s, path := openFile(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []string
	started := make(chan struct{}, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				_, err := s.Submit(bg, textJob(id, 1), t0)
				if i == 0 {
					started <- struct{}{}
				}
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("submit: %v", err)
					}
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}(w)
	}
	for i := 0; i < 16; i++ {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s = mustOpen(t, path)
	for _, id := range acked {
		if _, err := s.Job(bg, id); err != nil {
			t.Fatalf("acknowledged %s missing: %v", id, err)
		}
	}
}

// TestLingerWaitsForExpected: linger returns once the batch holds the
// expected operations (taking whatever else is queued too), and reports a
// wait that ran out, or was cut short by Close, as not paid off.
func TestLingerWaitsForExpected(t *testing.T) {
	w := &writer{ops: make(chan *op, maxBatch), quit: make(chan struct{})}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	batch := []*op{{}}
	// Queued before the wait starts: a goroutine sending them could be
	// starved past lingerFor on a loaded machine.
	for i := 0; i < 3; i++ {
		w.ops <- &op{}
	}
	if !w.linger(&batch, 3, timer) || len(batch) != 4 {
		t.Fatalf("linger with arrivals: batch of %d", len(batch))
	}
	batch = []*op{{}}
	if w.linger(&batch, 2, timer) || len(batch) != 1 {
		t.Fatalf("linger without arrivals: batch of %d", len(batch))
	}
	close(w.quit)
	if w.linger(&batch, 2, time.NewTimer(time.Hour)) {
		t.Fatal("linger after quit paid off")
	}
}

// TestCancelledCallerWaitsForItsRunningOperation: once the writer runs an
// operation, the caller's outputs belong to it until it answers, so a
// caller whose context ends mid-operation does not return before the
// operation has finished writing them.
func TestCancelledCallerWaitsForItsRunningOperation(t *testing.T) {
	s := mustOpen(t, ":memory:")
	ctx, cancel := context.WithCancel(bg)
	running, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	finished := false
	returned := make(chan error, 1)
	go func() {
		returned <- s.read(ctx, func(q querier) error {
			close(running)
			<-release
			finished = true
			return nil
		})
	}()
	<-running
	cancel()
	select {
	case err := <-returned:
		t.Fatalf("read returned (%v) while its operation was still running", err)
	case <-time.After(50 * time.Millisecond):
	}
	releaseOnce.Do(func() { close(release) })
	if err := <-returned; err != nil {
		t.Fatalf("read: %v", err)
	}
	if !finished {
		t.Fatal("read returned before its operation finished")
	}
}
