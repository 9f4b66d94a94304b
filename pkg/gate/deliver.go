package gate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/intake"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// Automatic delivery: with gate.json's delivery section, a coding job of
// a public-source repository is submitted with a delivery target; its
// coding success makes it delivering (pkg/store) and a delivery.Runner
// drives it to merged or failed. The Runner resumes every active delivery
// at Start, before /readyz, and then picks up new ones every
// recovery_interval.

// EnableDelivery turns on delivery through gh. It must be called before
// Serve, and only with a delivery section in the config.
func (g *Gate) EnableDelivery(gh delivery.GitHub) error {
	if g.cfg.Delivery == nil {
		return errors.New("gate: delivery is not configured")
	}
	m, err := delivery.NewMachine(gh, g.cfg.Delivery.machineConfig(), gateClock{g.now})
	if err != nil {
		return err
	}
	m.Describe(g.describePR)
	g.delivery = delivery.NewRunner(m, deliveryStore{g}, gateClock{g.now}, g.log, g.deliveryStoreError)
	return nil
}

// gitHubApp is the real GitHub for delivery: pkg/github's client with the
// App credentials read at load, pushing from the public-source bare
// repositories with git_executable under the Gate's reapers (like the
// fetches); tmp is a private directory for the push mirrors.
func (g *Gate) gitHubApp(tmp string) *delivery.App {
	return &delivery.App{
		API: github.New(nil, g.now, github.Options{}), AppID: g.sec.app.appID, Key: g.sec.app.key, Now: g.now,
		Git: g.cfg.GitExecutable, Reaper: g.reaper, TempDir: tmp, Secrets: g.sec.scan, Log: g.log,
		Local: func(repo delivery.Repo) (delivery.LocalRepo, bool) {
			for _, r := range g.repos {
				if owner, name, ok := r.gitHubRepository(); ok && owner == repo.Owner && name == repo.Name && g.preparedDir(r) != "" {
					// The repository's own git bounds, as for its fetches.
					return delivery.LocalRepo{Dir: g.preparedDir(r), DefaultBranch: r.DefaultBranch,
						GitTimeout: r.Execution.GitTimeout.Std(), GitOutputBytes: r.Execution.GitOutputBytes}, true
				}
			}
			return delivery.LocalRepo{}, false
		},
	}
}

// deliveryTempPrefix names the push mirrors' directory inside the public
// repository root.
const deliveryTempPrefix = ".forge-delivery-"

// deliveryTempDir makes the private directory of the push mirrors: in the
// public repository root (private to the Gate's user), after removing what
// a killed earlier process left there; in the system's temporary
// directory when there is no root.
func deliveryTempDir(root string) (string, error) {
	if root == "" {
		return os.MkdirTemp("", "forge-delivery-")
	}
	stale, _ := filepath.Glob(filepath.Join(root, deliveryTempPrefix+"*"))
	for _, d := range stale {
		os.RemoveAll(d)
	}
	return os.MkdirTemp(root, deliveryTempPrefix)
}

// deliveryTarget is where jobs of r are delivered: nil without delivery
// or when r is not a public-source GitHub repository.
func (g *Gate) deliveryTarget(r *RepositoryConfig) *store.DeliveryTarget {
	if g.delivery == nil {
		return nil
	}
	owner, name, ok := r.gitHubRepository()
	if !ok {
		return nil
	}
	return &store.DeliveryTarget{Owner: owner, Repo: name, BaseBranch: r.DefaultBranch}
}

// resumeDeliveries starts every active delivery not yet running.
func (g *Gate) resumeDeliveries() error {
	if g.delivery == nil {
		return g.abandonDeliveries()
	}
	n, err := g.delivery.Resume(g.ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		g.log.Info("deliveries resumed", "count", n)
	}
	return nil
}

// abandonDeliveries ends every active delivery with delivery_unconfigured:
// a Gate without the delivery section cannot drive them, and a job must
// not stay delivering without a visible reason.
func (g *Gate) abandonDeliveries() error {
	ds, err := g.st.ActiveDeliveries(g.ctx)
	if err != nil || len(ds) == 0 {
		return err
	}
	for _, d := range ds {
		prev := fromStore(d)
		err := g.st.SaveDelivery(g.ctx, d, toStore(delivery.Abandon(prev)), g.now())
		if err != nil && !errors.Is(err, store.ErrStale) {
			return err
		}
	}
	g.log.Warn("deliveries ended: no delivery section", "count", len(ds), "code", delivery.CodeUnconfigured)
	return nil
}

// deliveryLoop picks up deliveries created by coding successes.
func (g *Gate) deliveryLoop() {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.RecoveryInterval.Std())
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-g.failed:
			return
		case <-t.C:
			if g.isFull() || g.replicaDown.Load() {
				continue // picked up once the Gate leaves storage_full or the replica confirms writes again
			}
			if err := g.resumeDeliveries(); err != nil && g.ctx.Err() == nil {
				if g.storageFull(err) || g.unreplicated(err) {
					continue
				}
				g.fail(err)
				return
			}
		}
	}
}

func (g *Gate) deliveryStoreError(err error) {
	if storeFailure(err) {
		// Lack of space: the delivery is picked up again from what is
		// stored once the Gate leaves storage_full.
		g.storeFailed(err)
		return
	}
	// Stale: another writer moved the delivery on; the next pick-up
	// continues from what is stored.
	g.log.Warn("delivery save refused", "reason", err.Error())
}

// gateClock is the Gate's clock for pkg/delivery.
type gateClock struct{ now func() time.Time }

func (c gateClock) Now() time.Time { return c.now() }

func (c gateClock) Sleep(ctx context.Context, d time.Duration) error {
	return delivery.RealClock{}.Sleep(ctx, d)
}

// deliveryStore adapts the store to pkg/delivery.
type deliveryStore struct{ g *Gate }

func (s deliveryStore) ActiveDeliveries(ctx context.Context) ([]delivery.State, error) {
	ds, err := s.g.st.ActiveDeliveries(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]delivery.State, len(ds))
	for i, d := range ds {
		out[i] = fromStore(d)
		out[i].Review = s.g.reviewPolicy(out[i].Repo)
	}
	return out, nil
}

// reviewPolicy reports whether repo's deliveries merge only after an
// approval (DECISIONS 18): its intake section's merge policy, "review"
// by default; a repository without intake merges after CI ("auto").
func (g *Gate) reviewPolicy(repo delivery.Repo) bool {
	for _, r := range g.repos {
		if owner, name, ok := r.gitHubRepository(); ok && owner == repo.Owner && name == repo.Name {
			return r.Intake != nil && r.Intake.Resolve().Merge == intake.MergeReview
		}
	}
	return false
}

func (s deliveryStore) SaveDelivery(ctx context.Context, prev, next delivery.State) error {
	if next.Phase == delivery.PhaseFailed && !delivery.ValidCode(next.Code) {
		return store.ErrInvalid
	}
	err := s.g.st.SaveDelivery(ctx, toStore(prev), toStore(next), s.g.now())
	if !errors.Is(err, store.ErrInvalid) || next.Phase == delivery.PhaseFailed {
		return err
	}
	// next holds an answer the store cannot keep (GitHub should never
	// give one): end the delivery from prev rather than fail the same
	// save at every pick-up. The error still stops this goroutine.
	end := prev
	end.Phase, end.Code, end.PhaseAttempts = delivery.PhaseFailed, delivery.CodeUnavailable, 0
	if ferr := s.g.st.SaveDelivery(ctx, toStore(prev), toStore(end), s.g.now()); ferr != nil {
		return ferr
	}
	return err
}

func fromStore(d store.Delivery) delivery.State {
	return delivery.State{
		JobID: d.JobID, Repo: delivery.Repo{Owner: d.Target.Owner, Name: d.Target.Repo}, BaseBranch: d.Target.BaseBranch,
		CandidateSHA: d.CandidateSHA, Branch: d.Branch, PushOver: d.PushOver, Phase: delivery.Phase(d.Phase), PhaseAttempts: d.PhaseAttempts,
		NextAt: d.NextAt, StartedAt: d.StartedAt, CIStartedAt: d.CIStartedAt, PRNumber: d.PRNumber, PRURL: d.PRURL,
		CIState: d.CIState, ETag: d.ETag, MergeSHA: d.MergeSHA, Code: d.FailureCode, Usage: deliveryUsage(d.Usage),
		Requesters: d.Requesters,
	}
}

func deliveryUsage(u *store.Usage) *delivery.Usage {
	if u == nil {
		return nil
	}
	return &delivery.Usage{Requests: u.Requests, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens}
}

func toStore(s delivery.State) store.Delivery {
	return store.Delivery{
		JobID: s.JobID, Target: store.DeliveryTarget{Owner: s.Repo.Owner, Repo: s.Repo.Name, BaseBranch: s.BaseBranch},
		CandidateSHA: s.CandidateSHA, Branch: s.Branch, PushOver: s.PushOver, Phase: string(s.Phase), PhaseAttempts: s.PhaseAttempts,
		NextAt: s.NextAt, StartedAt: s.StartedAt, CIStartedAt: s.CIStartedAt, PRNumber: s.PRNumber, PRURL: s.PRURL,
		CIState: s.CIState, ETag: s.ETag, MergeSHA: s.MergeSHA, FailureCode: s.Code,
	}
}
