package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Store persists deliveries. Save commits next (the caller's previous
// state was prev); a terminal next also finishes the job (succeeded with
// the merge SHA, or failed with the code) in the same transaction.
type Store interface {
	ActiveDeliveries(ctx context.Context) ([]State, error)
	SaveDelivery(ctx context.Context, prev, next State) error
}

// Runner drives every active delivery in its own goroutine: wait until
// NextAt, Step, Save, repeat until terminal.
type Runner struct {
	m     *Machine
	st    Store
	clock Clock
	log   *slog.Logger
	// fatal is called with a store error (the Gate stops).
	fatal func(error)

	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
}

// NewRunner returns a Runner.
func NewRunner(m *Machine, st Store, clock Clock, log *slog.Logger, fatal func(error)) *Runner {
	return &Runner{m: m, st: st, clock: clock, log: log, fatal: fatal, running: map[string]bool{}}
}

// Resume starts a goroutine for every active delivery not already running.
// The Gate calls it at start (before it reports ready) and then
// periodically, which also picks up deliveries that coding successes
// created.
func (r *Runner) Resume(ctx context.Context) (int, error) {
	states, err := r.st.ActiveDeliveries(ctx)
	if err != nil {
		return 0, err
	}
	started := 0
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range states {
		if r.running[s.JobID] || s.Phase.Terminal() {
			continue
		}
		r.running[s.JobID] = true
		started++
		r.wg.Add(1)
		go r.drive(ctx, s)
	}
	return started, nil
}

// Wait blocks until every delivery goroutine has returned (after ctx of
// Resume ended).
func (r *Runner) Wait() { r.wg.Wait() }

func (r *Runner) drive(ctx context.Context, s State) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.running, s.JobID)
		r.mu.Unlock()
	}()
	for !s.Phase.Terminal() {
		if d := s.NextAt.Sub(r.clock.Now()); d > 0 {
			if r.clock.Sleep(ctx, d) != nil {
				return
			}
		}
		next, err := r.m.Step(ctx, s)
		if err != nil {
			return
		}
		if err := r.st.SaveDelivery(ctx, s, next); err != nil {
			if ctx.Err() == nil {
				r.fatal(err)
			}
			return
		}
		if next.Phase != s.Phase {
			r.log.Info("delivery", "job", next.JobID, "phase", string(next.Phase), "code", next.Code)
		}
		s = next
	}
}

// RealClock is the wall clock.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx ends.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Pace is the Machine's Pace.
func (r *Runner) Pace(budget string, rate RateLimit, paid bool) time.Time {
	return r.m.Pace(budget, rate, paid)
}

// Budgets is the Machine's Budgets.
func (r *Runner) Budgets() []Budget { return r.m.Budgets() }
