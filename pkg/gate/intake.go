package gate

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/intake"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Intake (DECISIONS 17, docs/intake.md): with delivery on, every
// repository with an intake section is polled on GitHub by one
// intake.Poller, which starts one job per trigger through intakeSink and
// keeps each issue's status comment.

// intakeRepos are the repositories with an intake section, as the Poller
// sees them.
func (g *Gate) intakeRepos() []intake.Repo {
	var out []intake.Repo
	for _, r := range g.cfg.Repositories {
		owner, name, ok := r.gitHubRepository()
		if r.Intake == nil || !ok {
			continue
		}
		out = append(out, intake.Repo{ID: r.ID, Owner: owner, Name: name, DefaultBranch: r.DefaultBranch, Settings: r.Intake.Resolve()})
	}
	return out
}

// intakeAppRetry is the wait before asking GitHub for the App's slug
// again.
const intakeAppRetry = time.Minute

// intakeLoop asks GitHub for the App's bot login (its own comments and
// events never start anything), then polls until the Gate stops.
func (g *Gate) intakeLoop(api *github.Client, app *delivery.App, repos []intake.Repo) {
	defer g.wg.Done()
	var slug string
	for {
		var err error
		if slug, err = api.AppSlugAs(g.ctx, github.App{ID: app.AppID, Key: app.Key}); err == nil {
			break
		}
		g.log.Warn("intake: cannot read the App on GitHub", "error", err.Error())
		select {
		case <-g.ctx.Done():
			return
		case <-time.After(intakeAppRetry):
		}
	}
	p := intake.NewPoller(api, g.st, intakeSink{g: g, app: app, read: readPull(app, g.now)}, slug+"[bot]", repos, g.now, g.log)
	g.log.Info("intake: polling", "repositories", len(repos))
	p.Run(g.ctx)
}

// intakeSink is the Gate's side of the Poller.
type intakeSink struct {
	g    *Gate
	app  *delivery.App
	read func(context.Context, intake.Repo, int) (pullView, error) // readPull: a follow-up's pull request
}

func (s intakeSink) Token(ctx context.Context, repo intake.Repo) (*github.Token, string, error) {
	return s.app.IntakeToken(ctx, delivery.Repo{Owner: repo.Owner, Name: repo.Name})
}

func (s intakeSink) Pace(budget string, r github.RateLimit, paid bool) time.Time {
	return s.g.delivery.Pace(budget, delivery.RateLimit{Limit: r.Limit, Remaining: r.Remaining, Reset: r.Reset}, paid)
}

func (s intakeSink) Followup(ctx context.Context, repo intake.Repo, c intake.PullComment) (intake.FollowupResult, error) {
	return s.g.followup(ctx, s.read, repo, c)
}

func (s intakeSink) Cancel(ctx context.Context, repo intake.Repo, number int) error {
	return s.g.cancelIntake(ctx, repo.ID, number)
}

// errIntakeStorage: the Gate is in storage_full; the trigger is read
// again by a later poll.
var errIntakeStorage = errors.New("gate: intake: storage full")

func (s intakeSink) Submit(ctx context.Context, repo intake.Repo, tr store.Trigger, instruction, base string) (string, bool, error) {
	return s.g.submitIntake(ctx, repo, tr, instruction, base)
}

// submitIntake stores the coding job of trigger tr, exactly like a
// submitted task with the repository's intake checks as its tests, and
// tr in the same transaction; a trigger stored before answers its job.
func (g *Gate) submitIntake(ctx context.Context, repo intake.Repo, tr store.Trigger, instruction, base string) (string, bool, error) {
	if id, ok, err := g.st.TriggerJob(ctx, tr.RepositoryID, tr.Kind, tr.EventID); err != nil || ok {
		return id, ok, err
	}
	r, ok := g.repos[repo.ID]
	if !ok {
		return "", false, errUnknownRepo
	}
	g.checkSpace()
	if g.isFull() {
		return "", false, errIntakeStorage
	}
	task, err := json.Marshal(wire.CodingTask{RepositoryID: r.ID, BaseSHA: base, Instruction: instruction, Tests: repo.Settings.Checks})
	if err != nil {
		return "", false, err
	}
	parsed, err := wire.ParseTask(task)
	if err != nil {
		return "", false, err
	}
	nj := store.NewJob{ID: newJobID(), Kind: string(parsed.Kind), Task: parsed.Canonical}
	plugin, release, err := g.codingJob(ctx, r, parsed.Coding, &nj)
	if err != nil {
		return "", false, err
	}
	job, taken, err := g.st.SubmitTrigger(ctx, nj, tr, g.now())
	release()
	if err != nil {
		return "", false, err
	}
	if !taken {
		g.wakeFor(nj.Pool, plugin, nj.RepositoryID)
	}
	return job.ID, taken, nil
}
