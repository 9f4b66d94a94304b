package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
	"github.com/0k-lab/agent-forge/pkg/secretscan"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Coding jobs: one leased attempt turns {repository, base, instruction,
// checks} into a candidate commit, in this order:
//
//  1. preparation: the task and policy decode and fit this Worker; the
//     repository is registered, under a root, at its canonical path; the
//     base commit exists and is an ancestor of the default branch (the
//     repository's HEAD branch); a private worktree is added, detached at
//     the base, in a fresh 0700 directory under worktree_root. Nothing is
//     ever fetched, cloned or pushed from anywhere but the Gate: a
//     public-source lease (a Gate registration) instead gets its base
//     from the Gate as a bundle into the Worker's source cache
//     (coding_cache.go) and runs in its own repository borrowing the
//     cache's objects (coding_attempt.go); its candidate goes back to the
//     Gate as a bundle before the attempt claims it (coding_commit.go).
//  2. plugin: workspace_edit in a fresh plugin process, offered progress,
//     cancel, commit_subject and agent_report.
//  3. workspace validation: the worktree's HEAD is still detached at the
//     base; refs (other than candidate refs this Worker created
//     meanwhile), Git config, hooks, alternates and the worktree's Git
//     metadata are unchanged; the change is staged (git add -A into the
//     Worker's private copy of the index, never the agent's, in the
//     Worker's own stage repository over a mirror of the workspace made
//     through descriptors: coding_stage.go) and
//     every changed path stays inside the worktree (no "..", no .git
//     component, no gitlink, no symlink whose target leaves the tree).
//     An unchanged tree is an empty change:
//     a terminal failure (the instruction produced nothing to review;
//     running the same instruction on the same base again is not expected
//     to help, and a candidate equal to its base would mean nothing).
//  4. scoped checks: the task's tests argv arrays, in order, stopping at
//     the first that does not pass, each in a restricted environment
//     under pkg/supervise. They run against the staged tree, whose files
//     are exactly the worktree's tracked content; the candidate is later
//     made from that same tree, not from whatever the checks leave behind.
//     Whatever the outcome so far, the shared repository state saved
//     before the plugin (refs, config, hooks; coding_restore.go) is then
//     put back; if that fails the attempt fails closed and the repository
//     is out of service for this Worker until it restarts.
//  5. candidate commit: only when every check passed, commit-tree of the
//     staged tree with parent = base, the task's author (or Agent Forge)
//     and the Agent Forge committer, and the deterministic ref
//     refs/agent-forge/candidates/<job>/<attempt>, created only if absent.
//     The check records then name the candidate SHA (the exact commit of
//     the tree they ran against); failed checks stay bound to the base.
//  6. evidence batch 1 is bound and ACKed by Gate, and only then is the
//     worktree removed (idempotently); a cleanup failure is batch 2; then
//     the result goes out (the lane sends it).
//
// A failure at any step becomes one evidence record naming the phase and
// a closed reason; nothing else (no argv value, path, output or secret)
// leaves the Worker.

// Git identities and defaults of candidate commits.
const (
	ForgeName       = wire.CommitterName
	ForgeEmail      = wire.CommitterEmail
	DefaultSubject  = "chore: apply coding task"
	CandidatePrefix = "refs/agent-forge/candidates/"
)

// Failure classes of coding steps: fail turns (phase, reason, class) into
// the specific wire code (codingCode); the evidence record carries the
// closed reason.
const (
	CodeScopedTestFailed = wire.FailureScopedTestFailed
	codeCodingTerminal   = wire.FailureInvalidTask
	codeCodingRetryable  = wire.FailureExecution
)

// Binder binds one evidence batch to the current attempt and returns nil
// once Gate has durably acknowledged it.
type Binder func(ctx context.Context, batch int, records []json.RawMessage) error

// errNoBinder is what a Binder-less run reports: evidence cannot be made
// durable, so no candidate may be claimed.
var errNoBinder = errors.New("no evidence binder")

// CodingOptions wires a CodingExecutor.
type CodingOptions struct {
	// LookupEnv supplies the values of allowlisted variables (os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Reaper runs plugins and checks under the Linux child-subreaper
	// wrapper (nil: none).
	Reaper *supervise.ReaperPool
	// Git is the absolute path of git (empty: found on LookupEnv("PATH")).
	Git string
	// Now is the clock for commit dates and durations (default time.Now).
	Now func() time.Time
	// Logger receives the source cache's records (fetches, maintenance;
	// counts and identifiers only). Nil discards them.
	Logger *slog.Logger
	// Secrets are the values no candidate, agent report or evidence
	// batch may hold (Secrets; coding_secrets.go). Nil: none.
	Secrets *secretscan.Set
}

// CodingExecutor runs coding jobs. It is safe for concurrent use by lanes.
type CodingExecutor struct {
	cfg *Config
	opt CodingOptions

	dirs *runDirs      // the plugins' private working directories
	sb   *sandboxRules // nil: no sandbox

	log *slog.Logger

	mu    sync.Mutex
	repos map[string]*repoGuard // by repository ID
}

// repoGuard is the Worker's view of one registered repository's shared
// state while attempts run on it.
type repoGuard struct {
	outOfService bool       // a restore failed: refuse later attempts
	inFlight     int        // attempts between saving and restoring
	baseline     savedState // the state before the first of them ran
	// created holds the candidate refs this Worker created (ref → commit)
	// while the baseline was held; they are expected beside it.
	created map[string]string
	// worktrees serialises git worktree add, remove and prune: concurrent
	// adds race inside git (one reads another's half-written entry).
	worktrees sync.Mutex
	// cache serialises fetches into a Gate registration's source cache
	// and its maintenance.
	cache sync.Mutex
	// borrowed counts, per cached base, the attempts whose repositories
	// borrow it (x.mu; coding_cache.go): maintenance keeps their refs.
	borrowed map[string]int
	// refs serialises the Worker's own reads and writes of the shared
	// refs: saving the baseline, snapshots, restores and candidate
	// creation (coding_restore.go). Lock order: refs, then x.mu.
	refs sync.Mutex
}

// guard returns id's guard; x.mu must be held.
func (x *CodingExecutor) guard(id string) *repoGuard {
	if x.repos == nil {
		x.repos = map[string]*repoGuard{}
	}
	g := x.repos[id]
	if g == nil {
		g = &repoGuard{}
		x.repos[id] = g
	}
	return g
}

// acquireBaseline returns the state the attempt restores after its
// plugin. Concurrent attempts on one repository share the state saved
// before the first of them started, so one attempt never "restores"
// another plugin's change it happened to see when it started.
func (x *CodingExecutor) acquireBaseline(ctx context.Context, j *codingJob) (savedState, error) {
	g := x.repoGuardOf(j.task.RepositoryID)
	g.refs.Lock() // no candidate ref is created while the baseline is saved
	defer g.refs.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if g.inFlight == 0 {
		s, err := j.saveShared(ctx)
		if err != nil {
			return savedState{}, err
		}
		g.baseline, g.created = s, nil
	}
	g.inFlight++
	return g.baseline, nil
}

// releaseBaseline ends an acquireBaseline; ok=false (the restore failed)
// takes the repository out of service until the Worker restarts.
func (x *CodingExecutor) releaseBaseline(id string, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.guard(id)
	g.inFlight--
	if !ok {
		g.outOfService = true
	}
	if g.inFlight == 0 {
		g.baseline, g.created = savedState{}, nil
	}
}

// worktreeLock returns the lock that serialises worktree administration
// on repository id.
func (x *CodingExecutor) worktreeLock(id string) *sync.Mutex {
	x.mu.Lock()
	defer x.mu.Unlock()
	return &x.guard(id).worktrees
}

// cacheLock returns the lock that serialises fetches into repository id's
// source cache.
func (x *CodingExecutor) cacheLock(id string) *sync.Mutex {
	x.mu.Lock()
	defer x.mu.Unlock()
	return &x.guard(id).cache
}

// outOfService reports whether a restore on repository id failed.
func (x *CodingExecutor) outOfService(id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.repos[id] != nil && x.repos[id].outOfService
}

// NewCodingExecutor returns the coding executor, or an error when git
// cannot be found.
func NewCodingExecutor(cfg *Config, opt CodingOptions) (*CodingExecutor, error) {
	if opt.LookupEnv == nil {
		opt.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Git == "" {
		path, _ := opt.LookupEnv("PATH")
		git, err := gitx.Find(path)
		if err != nil {
			return nil, err
		}
		opt.Git = git
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &CodingExecutor{cfg: cfg, opt: opt, log: log, dirs: &runDirs{root: cfg.RuntimeRoot}, sb: newSandboxRules(cfg)}, nil
}

// Execute implements Executor: it runs one coding attempt, binding its
// evidence with a.Bind before the worktree is removed. Without a binder
// the attempt never reports a candidate.
func (x *CodingExecutor) Execute(ctx context.Context, a *Attempt) Report {
	bind := a.Bind
	if bind == nil {
		bind = func(context.Context, int, []json.RawMessage) error { return errNoBinder }
	}
	j := &codingJob{x: x, attempt: a, lease: a.Lease, bind: bind}
	return j.run(ctx)
}

// codingJob is the state of one attempt.
type codingJob struct {
	x       *CodingExecutor
	attempt *Attempt
	lease   *wire.Lease
	bind    Binder
	task    wire.CodingTask
	inv     *invocation

	git       *gitx.Runner
	gitHome   string
	repo      repoPaths
	container string // private directory holding the worktree
	wt        string // the worktree
	admin     string // the worktree's administrative git dir
	// indexedAt is the change time (ns) a file of the worktree gets at
	// the least when changed after the private index was saved
	// (savePrivateIndex): one with an earlier ctime is as checked out.
	indexedAt int64
	branch    string
	boxDirs   sandboxDirs // the attempt's directories inside the sandbox
	// gate: an attempt on a Gate registration, in its own repository
	// (gateDirs) borrowing the source cache's objects.
	gate     bool
	gateDirs AttemptDirs
	// borrowed is the cached base this attempt registered as borrowed
	// (released at cleanup).
	borrowed string
	// shadow is the Worker-private mirror of the workspace that staging
	// runs over (coding_stage.go).
	shadow string

	records []evidence.Record
	// survivors: processes of the plugin or a check survived their
	// cgroup's kill; cleanup leaves the attempt's directories as they are
	// (the next start's sweep takes them, once the cgroups are empty).
	survivors bool
}

// outcome is how the work (before evidence and cleanup) ended.
type outcome struct {
	report Report
}

func (j *codingJob) fail(p evidence.Phase, r evidence.Reason, code string) outcome {
	j.records = append(j.records, evidence.Failure(p, r))
	return outcome{report: Report{Code: codingCode(p, r, code)}}
}

// outOfService ends an attempt on a repository whose shared state could
// not be restored (now or by an earlier attempt): terminal, whatever the
// attempt's own record, because every retry here would be refused.
func outOfService(o outcome) outcome {
	o.report = Report{Code: wire.FailureRepositoryOutOfService}
	return o
}

func (j *codingJob) run(ctx context.Context) Report {
	out := j.work(ctx)
	j.inv.closeEgress() // nothing of the attempt runs any more
	if rec, ok := j.inv.networkRecord(); ok {
		j.records = append(j.records, rec) // what its sandboxes and proxy refused
	}
	cancelled := ctx.Err() != nil
	r := out.report
	if cancelled {
		r = Report{Cancelled: true, Code: CodeWorkerShutdown}
	} else if err := j.bindWork(ctx, &r); err != nil {
		// Without durable evidence nothing may be claimed.
		r = Report{Code: codeCodingRetryable, Cancelled: ctx.Err() != nil}
		cancelled = true
	}
	cleanErr := j.cleanup()
	if cleanErr != nil && !cancelled {
		rec, _ := evidence.Failure(evidence.PhaseCleanup, evidence.ReasonCleanupFailed).Encode()
		if j.evidenceHoldsSecret([]json.RawMessage{rec}) {
			r = Report{Code: wire.FailureSecretInCandidate} // and the batch stays here
		} else if err := j.bind(ctx, 2, []json.RawMessage{rec}); err != nil {
			r = Report{Code: codeCodingRetryable, Cancelled: ctx.Err() != nil}
		}
	}
	return r
}

// bindWork sends evidence batch 1. A batch holding a secret is never
// sent: the attempt fails secret_in_candidate and its one record (no
// path) is sent instead.
func (j *codingJob) bindWork(ctx context.Context, r *Report) error {
	if len(j.records) == 0 {
		return nil
	}
	raw, err := evidence.EncodeAll(j.records)
	if err != nil {
		return err
	}
	if j.evidenceHoldsSecret(raw) {
		j.records = []evidence.Record{evidence.SecretInCandidate("")}
		*r = Report{Code: wire.FailureSecretInCandidate}
		if raw, err = evidence.EncodeAll(j.records); err != nil {
			return err
		}
	}
	return j.bind(ctx, 1, raw)
}

// work runs preparation through candidate creation.
func (j *codingJob) work(ctx context.Context) outcome {
	if o, ok := j.prepare(ctx); !ok {
		return o
	}
	boxDirs, err := j.sandboxDirs()
	if err != nil {
		return j.fail(evidence.PhasePreparation, evidence.ReasonWorktreeFailed, codeCodingRetryable)
	}
	j.boxDirs = boxDirs
	if j.gate {
		return j.workGate(ctx)
	}
	saved, err := j.x.acquireBaseline(ctx, j)
	if err != nil {
		return j.fail(evidence.PhasePreparation, evidence.ReasonGitFailed, codeCodingRetryable)
	}
	// Taken while the baseline is held, so the candidate refs created
	// meanwhile are known to both snapshots (coding_restore.go).
	before, err := j.snapshot(ctx)
	if err != nil {
		j.x.releaseBaseline(j.task.RepositoryID, true) // no plugin ran
		return j.fail(evidence.PhasePreparation, evidence.ReasonGitFailed, codeCodingRetryable)
	}
	res, tree, checks, o, ok := j.edit(ctx, before)
	// Violation or not, the shared repository gets its saved state back
	// before anything else happens; if that fails the attempt fails
	// closed and the repository leaves service.
	restored := j.restoreShared(saved)
	j.x.releaseBaseline(j.task.RepositoryID, restored)
	if !restored {
		if !ok {
			return outOfService(o) // its failure record stands
		}
		return outOfService(j.fail(evidence.PhaseWorkspaceValidation, evidence.ReasonGitFailed, codeCodingTerminal))
	}
	if !ok {
		return o
	}
	return j.finish(ctx, res, tree, checks)
}

// workGate runs an attempt on a Gate registration: nothing to save or
// restore (its repository is its own and goes with its container); the
// candidate goes to the Gate as a bundle before the attempt claims it.
func (j *codingJob) workGate(ctx context.Context) outcome {
	before, err := j.snapshot(ctx)
	if err != nil {
		return j.fail(evidence.PhasePreparation, evidence.ReasonGitFailed, codeCodingRetryable)
	}
	res, tree, checks, o, ok := j.edit(ctx, before)
	if !ok {
		return o
	}
	// The scoped checks ran after validation, in the same repository the
	// candidate commit and its bundle are made in: its git state must
	// still be the one validation accepted.
	after, err := j.snapshot(ctx)
	if err != nil {
		return j.fail(evidence.PhaseWorkspaceValidation, evidence.ReasonGitFailed, codeCodingRetryable)
	}
	if r := stateChange(before, after); r != "" {
		return j.fail(evidence.PhaseWorkspaceValidation, r, codeCodingTerminal)
	}
	return j.finish(ctx, res, tree, checks)
}

// finish makes the candidate commit (and, on a Gate registration, hands
// it to the Gate) and the success records.
func (j *codingJob) finish(ctx context.Context, res host.Outcome, tree string, checks []evidence.Check) outcome {
	sha, o, ok := j.commit(ctx, tree, res.CommitSubject)
	if !ok {
		return o
	}
	if j.gate {
		if o, ok := j.sendCandidate(ctx, sha, tree); !ok {
			return o
		}
	}
	for i := range checks {
		checks[i].SHA = sha
	}
	for _, c := range checks {
		j.records = append(j.records, evidence.CheckRecord(c))
	}
	j.records = append(j.records, evidence.Candidate(sha))
	r := Report{Succeeded: true, CandidateSHA: sha}
	if res.Summary != nil && res.Changes != nil {
		r.AgentReport = &wire.AgentReport{Summary: *res.Summary, Changes: res.Changes}
	}
	return outcome{report: r}
}

// edit runs the plugin, workspace validation and the scoped checks.
func (j *codingJob) edit(ctx context.Context, before gitState) (host.Outcome, string, []evidence.Check, outcome, bool) {
	res, o, ok := j.runPlugin(ctx)
	if !ok {
		return res, "", nil, o, false
	}
	tree, o, ok := j.validate(ctx, before)
	if !ok {
		return res, "", nil, o, false
	}
	if j.reportHoldsSecret(res) {
		return res, "", nil, j.failSecret(""), false
	}
	checks, o, ok := j.runChecks(ctx)
	if !ok {
		return res, "", nil, o, false
	}
	return res, tree, checks, outcome{}, true
}

// runPlugin runs workspace_edit in the worktree.
func (j *codingJob) runPlugin(ctx context.Context) (host.Outcome, outcome, bool) {
	run, code := j.inv.begin(j.x.dirs)
	if code != "" {
		return host.Outcome{}, j.fail(evidence.PhasePreparation, evidence.ReasonPluginRejected, code), false
	}
	defer run.end()
	j.attempt.observe(Event{Kind: EventPluginStarted})
	tr := j.attempt.Stages // live activity (activity.go)
	res, err := host.Run(ctx, run.cmd(j.x.opt.Reaper, j.x.sb, j.boxDirs), host.Request{
		Offer: []plugin.Capability{plugin.CapWorkspaceEdit, plugin.CapProgress, plugin.CapCancel,
			plugin.CapCommitSubject, plugin.CapAgentReport},
		Operation:   plugin.OpWorkspaceEdit,
		Workspace:   j.wt,
		Instruction: j.task.Instruction,
		TimeoutMS:   max(j.inv.exec.PluginTimeout.Std().Milliseconds(), 1),
	}, func(p host.Progress) {
		// Progress text stays Worker-local; only the stage is passed on.
		tr.Progress(p.Stage)
	})
	if err != nil {
		rep := runFailure(err)
		j.survivors = host.KindOf(err) == host.KindSurvivors
		run.survived = j.survivors
		return host.Outcome{}, j.fail(evidence.PhasePlugin, pluginReason(host.KindOf(err)), rep.Code), false
	}
	return res, outcome{}, true
}

func pluginReason(k host.Kind) evidence.Reason {
	switch k {
	case host.KindCancelled:
		return evidence.ReasonCancelled
	case host.KindTimeout:
		return evidence.ReasonTimedOut
	case host.KindOutputLimit:
		return evidence.ReasonOutputLimit
	case host.KindFailure:
		return evidence.ReasonPluginFailed
	case host.KindSpawn, host.KindRequest:
		return evidence.ReasonSpawnFailed
	case host.KindSurvivors:
		return evidence.ReasonSurvivors
	default:
		return evidence.ReasonProtocolViolation
	}
}

// cleanup removes the worktree and every private directory, through
// descriptors (removeTree). It is idempotent and runs without the
// attempt's context, so a lost lease still cleans up.
func (j *codingJob) cleanup() error {
	var failed bool
	if j.container != "" && !j.survivors {
		if err := j.removeWorktree(); err != nil {
			failed = true
		}
		if err := removeTree(j.container); err != nil {
			failed = true
		}
	}
	if j.shadow != "" {
		if err := removeTree(j.shadow); err != nil {
			failed = true
		}
	}
	if j.gitHome != "" {
		if err := removeTree(j.gitHome); err != nil {
			failed = true
		}
	}
	if j.borrowed != "" {
		j.x.releaseBase(j.task.RepositoryID, j.borrowed)
		j.borrowed = ""
	}
	if failed {
		return errors.New("cleanup failed")
	}
	return nil
}
