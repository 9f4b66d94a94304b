package activity

import (
	"sort"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Lease is what a Store needs to know about a lease that selected a
// version: its exact identity, the connection it was sent on, the
// selected version and its current deadline.
type Lease struct {
	JobID      string
	AttemptID  string
	Ordinal    int
	Lane       string // server-side lane name (worker-1, worker-1#2, …)
	Generation string // the lane connection's fencing token
	Version    string
	Deadline   time.Time
}

// Event is one recorded stage, as the debug viewer shows it.
type Event struct {
	JobID     string
	AttemptID string
	Ordinal   int
	Lane      string
	Stage     Stage
	At        time.Time // Gate's receive time (UTC)
}

// Store is the Gate's in-memory activity of current leases. The zero
// value is not usable; call NewStore.
type Store struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[string]*entry // by attempt id
	lanes   map[string]*entry // by lane name: the lane's current lease
	order   uint64            // Begin counter, for eviction
}

type entry struct {
	lease  Lease
	order  uint64
	events []Event // len ≤ MaxEvents, strictly advancing stages
}

// NewStore returns an empty Store that reads time from now.
func NewStore(now func() time.Time) *Store {
	return &Store{now: now, entries: map[string]*entry{}, lanes: map[string]*entry{}}
}

// Begin starts tracking a lease sent with l.Version selected. It replaces
// any earlier entry of the same attempt or of the same lane (a lane holds
// one lease at a time, so its previous lease is over). A lease without a
// known version, or with malformed ids, is not tracked (false).
func (s *Store) Begin(l Lease) bool {
	if !Known(l.Version) || !ident.ValidRef(l.JobID) || !ident.ValidRef(l.AttemptID) || l.Lane == "" || l.Ordinal < 1 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[l.AttemptID]; e != nil {
		s.removeLocked(e)
	}
	if e := s.lanes[l.Lane]; e != nil {
		s.removeLocked(e)
	}
	if len(s.entries) >= MaxEntries {
		s.pruneLocked(s.now())
	}
	if len(s.entries) >= MaxEntries {
		var oldest *entry
		for _, e := range s.entries {
			if oldest == nil || e.order < oldest.order {
				oldest = e
			}
		}
		s.removeLocked(oldest)
	}
	s.order++
	e := &entry{lease: l, order: s.order}
	s.entries[l.AttemptID] = e
	s.lanes[l.Lane] = e
	return true
}

// Extend records a lease's new deadline after an accepted heartbeat. It
// never shortens the deadline and ignores unknown or foreign attempts.
func (s *Store) Extend(jobID, attemptID, lane, generation string, deadline time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.matchLocked(jobID, attemptID, lane, generation); e != nil && deadline.After(e.lease.Deadline) {
		e.lease.Deadline = deadline
	}
}

// Record accepts one payload received on the connection (lane,
// generation) and returns the stamped event. It changes nothing and
// returns an error when the payload is invalid (ErrInvalid), is not the
// lane's current lease on this connection (ErrStale), carries a version
// other than the selected one (ErrVersion), arrives at or after the
// deadline (ErrExpired; the entry is dropped), or does not advance the
// stage (ErrOrder; this includes a fifth event).
func (s *Store) Record(lane, generation string, p Payload) (Event, error) {
	if err := p.Validate(); err != nil {
		return Event{}, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.matchLocked(p.JobID, p.AttemptID, lane, generation)
	if e == nil {
		return Event{}, ErrStale
	}
	if !now.Before(e.lease.Deadline) {
		s.removeLocked(e)
		return Event{}, ErrExpired
	}
	if p.Version != e.lease.Version {
		return Event{}, ErrVersion
	}
	if len(e.events) >= MaxEvents || (len(e.events) > 0 && p.Stage.Rank() <= e.events[len(e.events)-1].Stage.Rank()) {
		return Event{}, ErrOrder
	}
	ev := Event{
		JobID: e.lease.JobID, AttemptID: e.lease.AttemptID, Ordinal: e.lease.Ordinal,
		Lane: e.lease.Lane, Stage: p.Stage, At: now.UTC(),
	}
	e.events = append(e.events, ev)
	return ev, nil
}

// End forgets an attempt: its result was accepted or its lease withdrawn.
func (s *Store) End(attemptID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[attemptID]; e != nil {
		s.removeLocked(e)
	}
}

// DropConnection forgets the lease of a lane connection that closed. A
// newer connection of the same lane (another generation) keeps its own.
func (s *Store) DropConnection(lane, generation string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.lanes[lane]; e != nil && e.lease.Generation == generation {
		s.removeLocked(e)
	}
}

// Sweep drops every entry whose deadline has passed and returns how many.
func (s *Store) Sweep() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pruneLocked(s.now())
}

// Len is the number of tracked attempts, expired ones included until the
// next Sweep, Begin at capacity, or read.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Job returns the events of the job's live attempts, ordered by attempt
// ordinal and stage. Expired entries are dropped first. The result is a
// fresh slice (empty, not nil, when there is nothing).
func (s *Store) Job(jobID string) []Event {
	return s.collect(func(e *entry) bool { return e.lease.JobID == jobID })
}

// Snapshot returns the events of every live attempt, ordered by job id,
// ordinal and stage.
func (s *Store) Snapshot() []Event {
	return s.collect(func(*entry) bool { return true })
}

func (s *Store) collect(keep func(*entry) bool) []Event {
	s.mu.Lock()
	s.pruneLocked(s.now())
	out := []Event{}
	for _, e := range s.entries {
		if keep(e) {
			out = append(out, e.events...)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.JobID != b.JobID {
			return a.JobID < b.JobID
		}
		if a.Ordinal != b.Ordinal {
			return a.Ordinal < b.Ordinal
		}
		if a.AttemptID != b.AttemptID {
			return a.AttemptID < b.AttemptID
		}
		return a.Stage.Rank() < b.Stage.Rank()
	})
	return out
}

// matchLocked returns the entry whose lease is exactly (job, attempt) on
// the lane's current connection, or nil.
func (s *Store) matchLocked(jobID, attemptID, lane, generation string) *entry {
	e := s.entries[attemptID]
	if e == nil || e.lease.JobID != jobID || e.lease.Lane != lane || e.lease.Generation != generation || s.lanes[lane] != e {
		return nil
	}
	return e
}

func (s *Store) removeLocked(e *entry) {
	if s.entries[e.lease.AttemptID] == e {
		delete(s.entries, e.lease.AttemptID)
	}
	if s.lanes[e.lease.Lane] == e {
		delete(s.lanes, e.lease.Lane)
	}
}

func (s *Store) pruneLocked(now time.Time) int {
	n := 0
	for _, e := range s.entries {
		if !now.Before(e.lease.Deadline) {
			s.removeLocked(e)
			n++
		}
	}
	return n
}
