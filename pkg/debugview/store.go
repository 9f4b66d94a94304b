package debugview

import (
	"context"
	"errors"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// FromStore adapts the Gate's store to Reader. poolOf, when not nil, names
// the pool of a Worker id (the store does not keep pools). The adapter
// copies only the fields the Reader records have: results, agent reports
// and evidence the store returns are dropped here.
func FromStore(st *store.Store, poolOf func(workerID string) string) Reader {
	return storeReader{st: st, poolOf: poolOf}
}

type storeReader struct {
	st     *store.Store
	poolOf func(string) string
}

func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

func optTime(t *store.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func fromStoreJob(j store.Job) Job {
	v := Job{
		ID:           j.ID,
		Kind:         j.Kind,
		Status:       j.Status,
		FailureCode:  j.FailureCode,
		RepositoryID: j.RepositoryID,
		BaseSHA:      j.BaseSHA,
		AttemptCount: j.AttemptCount,
		RetryAt:      optTime(j.RetryAt),
		CreatedAt:    j.CreatedAt.Time,
		UpdatedAt:    j.UpdatedAt.Time,
	}
	if d := j.Delivery; d != nil {
		v.DeliveryPhase, v.DeliveryBranch, v.PRURL, v.CIState, v.MergeSHA = d.Phase, d.Branch, d.PRURL, d.CIState, d.MergeSHA
	}
	return v
}

func fromStoreUsage(u *store.Usage) *Usage {
	if u == nil {
		return nil
	}
	return &Usage{Requests: u.Requests, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens}
}

func (r storeReader) DebugJobs(ctx context.Context, afterID string, limit int) ([]Job, error) {
	jobs, err := r.st.DebugJobs(ctx, afterID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, fromStoreJob(j))
	}
	return out, nil
}

func (r storeReader) DebugLanes(ctx context.Context, after string, limit int) ([]Lane, error) {
	lanes, err := r.st.DebugLanes(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Lane, 0, len(lanes))
	for _, l := range lanes {
		v := Lane{Lane: l.Lane, WorkerID: l.WorkerID, Connected: l.Connected, ConnectedAt: l.ConnectedAt,
			DisconnectedAt: l.DisconnectedAt, JobID: l.JobID, AttemptID: l.AttemptID}
		if r.poolOf != nil {
			v.Pool = r.poolOf(l.WorkerID)
		}
		out = append(out, v)
	}
	return out, nil
}

func (r storeReader) DebugJob(ctx context.Context, id string) (Job, []Attempt, error) {
	j, attempts, err := r.st.DebugJob(ctx, id)
	if err != nil {
		return Job{}, nil, notFound(err)
	}
	out := make([]Attempt, 0, len(attempts))
	for _, a := range attempts {
		out = append(out, Attempt{
			ID:          a.ID,
			Ordinal:     a.Ordinal,
			Status:      a.Status,
			Lane:        a.WorkerID,
			LeasedAt:    a.LeasedAt.Time,
			DeadlineAt:  a.DeadlineAt.Time,
			CompletedAt: optTime(a.CompletedAt),
			Disposition: a.Disposition,
			FailureCode: a.FailureCode,
			Usage:       fromStoreUsage(a.Usage),
		})
	}
	return fromStoreJob(j), out, nil
}

func (r storeReader) DebugEvents(ctx context.Context, id string, afterSeq int64, limit int) ([]Event, error) {
	events, err := r.st.DebugEvents(ctx, id, afterSeq, limit)
	if err != nil {
		return nil, notFound(err)
	}
	out := make([]Event, 0, len(events))
	for _, e := range events {
		out = append(out, Event{Seq: int64(e.Seq), Type: e.Type, At: e.At.Time, Attempt: e.Attempt, Code: e.Code})
	}
	return out, nil
}
