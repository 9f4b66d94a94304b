package gate

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/intake"
	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Follow-ups (DECISIONS 18): a command on a pull request the Gate
// delivered, found by the intake poller and authorised there, becomes a
// job whose base is the pull request's head (the previous candidate) and
// whose candidate goes to the same branch; the store decides whether it
// starts (store.SubmitFollowup), in one transaction with the trigger.

// followupWords is what the pull request's status comment says of each
// refusal (no @-mention, nothing from GitHub's text).
var followupWords = map[string]string{
	store.RefusedNotDelivered: "Agent Forge did not open this pull request, so it does not work on it. Label an issue to start a job.",
	store.RefusedClosed:       "This pull request is closed or merged: Agent Forge starts no follow-up on it. Label the issue again for a new pull request.",
	store.RefusedBusy:         "A job of this pull request is still running (coding, pushing or merging): one at a time. Write the command again once it is done.",
	store.RefusedLimit: "This pull request has had as many follow-up jobs as the repository allows (max_followups), so Agent Forge waits for a person. " +
		"The operator can raise max_followups in gate.json and restart the Gate; then write the command again. Or close this pull request and label the issue again.",
	store.RefusedBaseMoved: "The pull request's head is not a commit Agent Forge delivered (someone pushed to its branch): it builds only on its own commits. " +
		"Merge or close this pull request by hand, or label the issue again.",
	store.RefusedBaseGone: "Agent Forge no longer holds the pull request's head commit (it was delivered too long ago), so it cannot build on it. Label the issue again for a fresh pull request.",
}

// pullView is what a follow-up needs of its pull request, as GitHub
// answered when the command was handled.
type pullView struct {
	Open        bool
	HeadSHA     string
	Title, Body string
	Author      string
}

// followupTokenMargin: a cached token is replaced this long before it
// expires.
const followupTokenMargin = 5 * time.Minute

// readPull reads pull request n of repo through the App: the pull
// request (state, head) and its issue (title, description), with an
// intake token kept per repository until shortly before it expires (a
// command costs its two reads, not a token too).
func readPull(app *delivery.App, now func() time.Time) func(ctx context.Context, repo intake.Repo, n int) (pullView, error) {
	var (
		mu     sync.Mutex
		tokens = map[string]*github.Token{}
	)
	return func(ctx context.Context, repo intake.Repo, n int) (pullView, error) {
		mu.Lock()
		tok := tokens[repo.ID]
		mu.Unlock()
		if tok == nil || !now().Before(tok.ExpiresAt.Add(-followupTokenMargin)) {
			var err error
			if tok, _, err = app.IntakeToken(ctx, delivery.Repo{Owner: repo.Owner, Name: repo.Name}); err != nil {
				return pullView{}, err
			}
			mu.Lock()
			tokens[repo.ID] = tok
			mu.Unlock()
		}
		pr, err := app.API.GetPull(ctx, tok, repo.Owner, repo.Name, n)
		if err != nil {
			return pullView{}, err
		}
		issue, err := app.API.GetIssue(ctx, tok, repo.Owner, repo.Name, n)
		if err != nil {
			return pullView{}, err
		}
		return pullView{Open: pr.Open(), HeadSHA: pr.HeadSHA, Title: issue.Title, Body: issue.Body, Author: issue.User.Login}, nil
	}
}

// followup is the hand-off of command c on pull request c.Number of repo,
// which read reads.
func (g *Gate) followup(ctx context.Context, read func(context.Context, intake.Repo, int) (pullView, error), repo intake.Repo, c intake.PullComment) (intake.FollowupResult, error) {
	tr := store.Trigger{RepositoryID: repo.ID, Kind: c.Kind, EventID: c.EventID, Number: int64(c.Number), Actor: c.Actor}
	// Answered before (a re-poll, a restart): the same answer, no request.
	if id, refusal, ok, err := g.st.TriggerAnswer(ctx, tr.RepositoryID, tr.Kind, tr.EventID); err != nil || ok {
		return followupAnswer(id, refusal), err
	}
	r, ok := g.repos[repo.ID]
	if !ok {
		return intake.FollowupResult{}, errUnknownRepo
	}
	pr, err := read(ctx, repo, c.Number)
	if err != nil {
		return intake.FollowupResult{}, err
	}
	f := store.Followup{Open: pr.Open, HeadSHA: pr.HeadSHA, MaxFollowups: repo.Settings.MaxFollowups}
	g.checkSpace()
	if g.isFull() {
		return intake.FollowupResult{}, errIntakeStorage
	}
	if g.sources == nil || r.RepositoryURL == "" {
		return intake.FollowupResult{}, errUnknownRepo
	}
	// The base is exactly a candidate the Gate stored, pinned like any
	// open job's base once the job is stored (holdPrepared).
	prepared, release, err := g.holdPrepared(r, func() (string, error) {
		return g.sources.PrepareCandidate(ctx, publicSource(r), pr.HeadSHA)
	})
	var se *source.Error
	if errors.As(err, &se) && se.Reason == source.ReasonBaseMissing {
		res, err := g.st.RefuseFollowupBaseGone(ctx, tr, f, g.now())
		return followupAnswer("", res.Refusal), err
	}
	if err != nil {
		return intake.FollowupResult{}, err
	}
	defer release()
	instruction := intake.Instruction(intake.Issue{Repository: repo.Owner + "/" + repo.Name, Number: c.Number,
		Title: pr.Title, Body: pr.Body, Author: pr.Author,
		Trigger: intake.Trigger{Kind: c.Kind, Actor: c.Actor, Text: c.Text, Path: c.Path, Line: c.Line, DiffHunk: c.DiffHunk}})
	task, err := json.Marshal(wire.CodingTask{RepositoryID: r.ID, BaseSHA: pr.HeadSHA, Instruction: instruction, Tests: repo.Settings.Checks})
	if err != nil {
		return intake.FollowupResult{}, err
	}
	parsed, err := wire.ParseTask(task)
	if err != nil {
		return intake.FollowupResult{}, err
	}
	nj := store.NewJob{ID: newJobID(), Kind: string(parsed.Kind), Task: parsed.Canonical,
		RepositoryID: r.ID, Pool: r.WorkerPool, Policy: g.repoPolicy[r.ID], PreparedPath: prepared,
		DefaultBranch: r.DefaultBranch, BaseSHA: pr.HeadSHA, TestArgCounts: make([]int, len(parsed.Coding.Tests)),
		Delivery: g.deliveryTarget(r)}
	for i, argv := range parsed.Coding.Tests {
		nj.TestArgCounts[i] = len(argv)
	}
	res, err := g.st.SubmitFollowup(ctx, nj, tr, f, g.now())
	if err != nil {
		return intake.FollowupResult{}, err
	}
	if res.Job.ID != "" && !res.Taken {
		g.log.Info("intake: follow-up job", "repository_id", r.ID, "number", c.Number, "job", res.Job.ID,
			"ordinal", res.Ordinal, "superseded", res.Superseded)
		g.wakeFor(nj.Pool, r.Execution.PluginID, nj.RepositoryID)
	}
	return followupAnswer(res.Job.ID, res.Refusal), nil
}

// followupAnswer is the poller's view of a stored answer.
func followupAnswer(job, refusal string) intake.FollowupResult {
	if job != "" {
		return intake.FollowupResult{JobID: job}
	}
	return intake.FollowupResult{Refusal: refusal, Text: followupWords[refusal]}
}

// cancelIntake ends the unfinished jobs of issue or pull request number
// of repository repoID (its label removed by someone who may, or it was
// closed): store.CancelIntake, then the lanes running one of their
// attempts are told to stop, as for an expired lease.
func (g *Gate) cancelIntake(ctx context.Context, repoID string, number int) error {
	g.checkSpace()
	if g.isFull() {
		return errIntakeStorage
	}
	c, err := g.st.CancelIntake(ctx, repoID, int64(number), g.now())
	if err != nil {
		return err
	}
	for _, e := range c.Attempts {
		g.cancelExpired(e)
	}
	if len(c.Jobs) > 0 {
		g.log.Info("intake: jobs cancelled", "repository_id", repoID, "number", number, "jobs", len(c.Jobs),
			"attempts", len(c.Attempts), "code", store.CodeCancelled)
	}
	return nil
}
