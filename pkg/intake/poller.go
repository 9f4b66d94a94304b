package intake

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// Poller timing.
const (
	// Overlap is how far before the newest change it read a feed's since
	// cursor stays: GitHub's lists catch up with a change a little after
	// it happened, so a cursor exactly at the newest change could skip an
	// older change that appears late.
	Overlap = 2 * time.Minute
	// tokenMargin: an installation token is replaced this long before
	// it expires.
	tokenMargin = 5 * time.Minute
	// permissionTTL is how long a collaborator-permission answer is
	// believed (for the comments quoted in an instruction; a trigger's
	// actor is always asked afresh).
	permissionTTL = time.Minute
	// failureWait is the pause of a repository after a failed poll.
	failureWait = time.Minute
)

// Repo is one repository with intake, as the Poller sees it.
type Repo struct {
	ID            string // the Gate's repository id
	Owner, Name   string
	DefaultBranch string
	Settings      Settings
}

// PullComment is a command comment on a pull request (DECISIONS 18),
// authorised, that the Poller hands to the follow-up path.
type PullComment struct {
	Kind     string // store.TriggerComment or store.TriggerReviewComment
	EventID  int64  // the comment's id
	Number   int    // the pull request's number
	Actor    string
	Text     string
	Path     string // review comments: the file, line and diff hunk
	Line     int
	DiffHunk string
	At       time.Time // when the comment was made
}

// Sink is the Gate's side of the Poller.
type Sink interface {
	// Token returns an installation token for repo holding issues write
	// and contents read, and the name of the rate-limit budget its
	// requests spend.
	Token(ctx context.Context, repo Repo) (*github.Token, string, error)
	// Submit stores the coding job of trigger tr (instruction, base) and
	// tr in one transaction (store.SubmitTrigger); taken: tr was stored
	// before, jobID is then the job it started.
	Submit(ctx context.Context, repo Repo, tr store.Trigger, instruction, base string) (jobID string, taken bool, err error)
	// Pace returns when the next feed read on budget may be sent, given
	// the rate limit an answer reported and whether it counted.
	Pace(budget string, rate github.RateLimit, paid bool) time.Time
	// Followup hands an authorised command comment on a pull request to
	// the follow-up path (DECISIONS 18), which answers the job it started
	// or why it started none; the Poller reacts and keeps the pull
	// request's status comment.
	Followup(ctx context.Context, repo Repo, c PullComment) (FollowupResult, error)
	// Cancel ends the running jobs of issue or pull request number: it
	// was closed, or an authorised person removed the label.
	Cancel(ctx context.Context, repo Repo, number int) error
}

// FollowupResult is what the follow-up path did with a command: the job
// it started (or had started for it before), or a refusal: a short code
// (lowercase letters, digits, underscores) and the words the status
// comment says (no @-mention).
type FollowupResult struct {
	JobID   string
	Refusal string
	Text    string
}

// Poller finds intake triggers by polling GitHub (DECISIONS 17) and
// starts one job per trigger through its Sink; it keeps one status
// comment per issue (status.go).
type Poller struct {
	api   *github.Client
	st    *store.Store
	sink  Sink
	bot   string // the App's bot login
	now   func() time.Time
	log   *slog.Logger
	repos []*repoState
}

// repoState is what the Poller holds of one repository in memory.
type repoState struct {
	Repo
	tok      *github.Token
	budget   string
	issues   feed
	comments feed
	reviews  feed
	// seen: the issues, comments and review comments handled at their
	// updated_at, so a re-read of the overlap window costs no further
	// request.
	seenIssue   map[int]string // issueKey
	seenComment map[int64]time.Time
	seenReview  map[int64]time.Time
	perms       map[string]permEntry
	next        time.Time
}

type permEntry struct {
	d  Decision
	at time.Time
}

// feed is one repository-wide feed's cursor and conditional state. The
// ETag belongs to the token it was read with: a request with another
// (installation tokens rotate hourly) goes without it.
type feed struct {
	name    string
	since   time.Time
	loaded  bool
	etag    string
	etagTok *github.Token
	perPage int
}

// NewPoller returns a Poller of repos. bot is the App's bot login
// (slug[bot]): its comments and events never start anything.
func NewPoller(api *github.Client, st *store.Store, sink Sink, bot string, repos []Repo, now func() time.Time, log *slog.Logger) *Poller {
	p := &Poller{api: api, st: st, sink: sink, bot: bot, now: now, log: log}
	for _, r := range repos {
		p.repos = append(p.repos, &repoState{Repo: r,
			issues:    feed{name: store.FeedIssues, perPage: github.FeedPerPage},
			comments:  feed{name: store.FeedComments, perPage: github.FeedPerPage},
			reviews:   feed{name: store.FeedReviewComments, perPage: github.FeedPerPage},
			seenIssue: map[int]string{}, seenComment: map[int64]time.Time{}, seenReview: map[int64]time.Time{},
			perms: map[string]permEntry{}})
	}
	return p
}

// Run polls every repository when it is due, and brings the status
// comments up to date after each round, until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	for ctx.Err() == nil {
		next := p.now().Add(failureWait)
		for _, r := range p.repos {
			if !p.now().Before(r.next) {
				r.next = p.poll(ctx, r)
			}
			if r.next.Before(next) {
				next = r.next
			}
		}
		p.updateStatuses(ctx)
		t := time.NewTimer(max(next.Sub(p.now()), 100*time.Millisecond))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// errStop ends a round: what remains is read again on the next one.
var errStop = errors.New("intake: poll stopped")

// poll reads repo's three feeds once and handles what changed; it returns
// when the repository is due again.
func (p *Poller) poll(ctx context.Context, r *repoState) time.Time {
	now := p.now()
	if r.tok == nil || !now.Before(r.tok.ExpiresAt.Add(-tokenMargin)) {
		tok, budget, err := p.sink.Token(ctx, r.Repo)
		if err != nil {
			p.log.Warn("intake: no installation token", "repository", r.ID, "error", err.Error())
			return now.Add(failureWait)
		}
		r.tok, r.budget = tok, budget
	}
	next := now
	for _, f := range []*feed{&r.issues, &r.comments, &r.reviews} {
		at, err := p.readFeed(ctx, r, f)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("intake: poll failed", "repository", r.ID, "feed", f.name, "error", err.Error())
			}
			if at.IsZero() {
				at = now.Add(failureWait)
			}
		}
		if at.After(next) {
			next = at
		}
	}
	return next
}

// readFeed reads one page of f and handles it; it returns when f may be
// read again.
func (p *Poller) readFeed(ctx context.Context, r *repoState, f *feed) (time.Time, error) {
	if !f.loaded {
		since, ok, err := p.st.IntakeCursor(ctx, r.ID, f.name)
		if err != nil {
			return time.Time{}, err
		}
		if !ok {
			// A new intake starts from now: labels and comments from
			// before it was enabled start nothing.
			since = p.now().UTC().Truncate(time.Second)
			if err := p.st.SetIntakeCursor(ctx, r.ID, f.name, since); err != nil {
				return time.Time{}, err
			}
		}
		f.since, f.loaded = since, true
	}
	etag := f.etag
	if f.etagTok != r.tok {
		etag = ""
	}
	var (
		rate     github.RateLimit
		notMod   bool
		full     bool
		last     time.Time
		n        int
		readErr  error
		handlErr error
	)
	switch f.name {
	case store.FeedIssues:
		page, err := p.api.ListIssuesSince(ctx, r.tok, r.Owner, r.Name, f.since, f.perPage, etag)
		if readErr = err; err == nil {
			rate, notMod, full, n = page.Rate, page.NotModified, page.Full, len(page.Items)
			f.etag, f.etagTok = page.ETag, r.tok
			for _, is := range page.Items {
				if handlErr = p.issue(ctx, r, is); handlErr != nil {
					break
				}
				last = is.UpdatedAt
			}
		}
	case store.FeedComments:
		page, err := p.api.ListIssueCommentsSince(ctx, r.tok, r.Owner, r.Name, f.since, f.perPage, etag)
		if readErr = err; err == nil {
			rate, notMod, full, n = page.Rate, page.NotModified, page.Full, len(page.Items)
			f.etag, f.etagTok = page.ETag, r.tok
			for _, c := range page.Items {
				if handlErr = p.comment(ctx, r, c); handlErr != nil {
					break
				}
				last = c.UpdatedAt
			}
		}
	case store.FeedReviewComments:
		page, err := p.api.ListReviewCommentsSince(ctx, r.tok, r.Owner, r.Name, f.since, f.perPage, etag)
		if readErr = err; err == nil {
			rate, notMod, full, n = page.Rate, page.NotModified, page.Full, len(page.Items)
			f.etag, f.etagTok = page.ETag, r.tok
			for _, c := range page.Items {
				if handlErr = p.reviewComment(ctx, r, c); handlErr != nil {
					break
				}
				last = c.UpdatedAt
			}
		}
	}
	if readErr != nil {
		return p.afterError(r, f, readErr), readErr
	}
	at := p.sink.Pace(r.budget, rate, !notMod)
	if handlErr != nil {
		// Handled up to last: the rest is read again next time.
		f.etag = ""
		return at, handlErr
	}
	if !notMod {
		if f.perPage < github.FeedPerPage {
			f.perPage = min(github.FeedPerPage, f.perPage*2)
		}
		if err := p.advance(ctx, r, f, n, full, last); err != nil {
			return at, err
		}
		if full {
			return p.now(), nil // more waits behind this page
		}
	}
	return at, nil
}

// afterError decides the wait after a failed feed read: a page too large
// is asked for again at half the size at once; a limit waits as GitHub
// said.
func (p *Poller) afterError(r *repoState, f *feed, err error) time.Time {
	var e *github.APIError
	if errors.As(err, &e) {
		switch e.Class {
		case github.ClassTooLarge:
			if f.perPage > 1 {
				f.perPage = max(1, f.perPage/2)
				return p.now()
			}
		case github.ClassRateLimited:
			return p.now().Add(max(e.RetryAfter, failureWait))
		case github.ClassUnauthorized:
			r.tok = nil // revoked or rotated: mint another
		}
	}
	return p.now().Add(failureWait)
}

// advance moves f's since cursor after a page handled whole (n items, the
// newest change at last). It stays while the page is at most half full:
// the same since keeps the same answer, which GitHub then confirms with a
// free 304. A fuller page moves it to last less Overlap (a full one to
// last itself, or a second past it when every item of the page changed in
// that one second, so that a burst cannot hold it back forever).
func (p *Poller) advance(ctx context.Context, r *repoState, f *feed, n int, full bool, last time.Time) error {
	if n <= f.perPage/2 || last.IsZero() {
		return nil
	}
	next := last.Add(-Overlap)
	if full {
		next = last
		if !last.After(f.since) {
			next = f.since.Add(time.Second)
		}
	}
	if !next.After(f.since) {
		return nil
	}
	if err := p.st.SetIntakeCursor(ctx, r.ID, f.name, next); err != nil {
		return err
	}
	f.since, f.etag = next, ""
	return nil
}

// notBefore is the oldest trigger time a feed may still start: what is
// older was handled when the cursor was behind it, or predates intake.
func (r *repoState) notBefore(f *feed) time.Time { return f.since.Add(-Overlap) }

// issue handles one issue of the feed: an open issue (not a pull
// request) carrying the label may hold a new labeled event.
func (p *Poller) issue(ctx context.Context, r *repoState, is github.Issue) error {
	key := issueKey(is)
	if r.seenIssue[is.Number] == key {
		return nil
	}
	if is.State != "open" {
		// Closed: whatever of it runs is cancelled.
		if err := p.sink.Cancel(ctx, r.Repo, is.Number); err != nil {
			return err
		}
		r.seenIssue[is.Number] = key
		return nil
	}
	if is.IsPull {
		r.seenIssue[is.Number] = key
		return nil
	}
	if !is.HasLabel(r.Settings.Label) {
		if err := p.unlabelled(ctx, r, is); err != nil {
			return err
		}
		r.seenIssue[is.Number] = key
		return nil
	}
	events, err := p.api.IssueEvents(ctx, r.tok, r.Owner, r.Name, is.Number)
	if err != nil {
		return err
	}
	ev, ok := LatestLabel(events, r.Settings.Label)
	if !ok || ev.CreatedAt.Before(r.notBefore(&r.issues)) {
		r.seenIssue[is.Number] = key
		return nil
	}
	tr := store.Trigger{RepositoryID: r.ID, Kind: store.TriggerLabel, EventID: ev.ID, Number: int64(is.Number), Actor: ev.Actor.Login}
	if err := p.trigger(ctx, r, tr, Actor{Login: ev.Actor.Login, Type: ev.Actor.Type}, ev.CreatedAt, Trigger{Kind: store.TriggerLabel, Actor: ev.Actor.Login}, nil); err != nil {
		return err
	}
	r.seenIssue[is.Number] = key
	return nil
}

// issueKey is what the poller remembers of an issue it handled: its
// updated_at (to the second on GitHub), state and labels, so that a label
// added in the same second as the last change is still seen.
func issueKey(is github.Issue) string {
	labels := slices.Clone(is.Labels)
	for i := range labels {
		labels[i] = strings.ToLower(labels[i])
	}
	slices.Sort(labels)
	return is.UpdatedAt.Format(time.RFC3339Nano) + "\x00" + is.State + "\x00" + strings.Join(labels, "\x00")
}

// unlabelled cancels the running job of an open issue that lost the
// label, when an authorised person removed it (a triage user can remove
// labels too: their removal cancels nothing). Only an issue whose status
// comment still reports a job costs a request.
func (p *Poller) unlabelled(ctx context.Context, r *repoState, is github.Issue) error {
	sc, ok, err := p.st.IntakeStatus(ctx, r.ID, int64(is.Number))
	if err != nil || !ok || sc.JobID == "" || sc.Final {
		return err
	}
	events, err := p.api.IssueEvents(ctx, r.tok, r.Owner, r.Name, is.Number)
	if err != nil {
		return err
	}
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if (e.Event == "labeled" || e.Event == "unlabeled") && strings.EqualFold(e.Label, r.Settings.Label) {
			if e.Event == "labeled" {
				return nil
			}
			d, err := p.authorize(ctx, r, Actor{Login: e.Actor.Login, Type: e.Actor.Type}, true)
			if err != nil || !d.Start {
				return err
			}
			return p.sink.Cancel(ctx, r.Repo, is.Number)
		}
	}
	return nil
}

// LatestLabel returns the labeled event that put label on the issue: the
// latest labeled or unlabeled event of that label (names compare without
// case), when it is a labeled one. Earlier labeled events were undone or
// came before, so only the latest can be a trigger.
func LatestLabel(events []github.IssueEvent, label string) (github.IssueEvent, bool) {
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if (e.Event == "labeled" || e.Event == "unlabeled") && strings.EqualFold(e.Label, label) {
			return e, e.Event == "labeled"
		}
	}
	return github.IssueEvent{}, false
}

// comment handles one comment of the feed: a comment that starts with the
// command, by an authorised author, on an issue starts a job; on a pull
// request it goes to the follow-up path.
func (p *Poller) comment(ctx context.Context, r *repoState, c github.IssueComment) error {
	if seen, ok := r.seenComment[c.ID]; ok && seen.Equal(c.UpdatedAt) {
		return nil
	}
	actor := Actor{Login: c.User.Login, Type: c.User.Type}
	if !StartsWithCommand(c.Body, r.Settings.Command) || c.CreatedAt.Before(r.notBefore(&r.comments)) ||
		!Authorize(Permission{Permission: permissionAdmin, RoleName: "admin"}, actor, p.bot).Start {
		// Not a command, older than intake, or an author no permission
		// could authorise (a bot, ours included): nothing is asked.
		r.seenComment[c.ID] = c.UpdatedAt
		return nil
	}
	is, err := p.api.GetIssue(ctx, r.tok, r.Owner, r.Name, c.IssueNumber)
	if err != nil {
		return err
	}
	tr := store.Trigger{RepositoryID: r.ID, Kind: store.TriggerComment, EventID: c.ID, Number: int64(c.IssueNumber), Actor: c.User.Login}
	if is.IsPull {
		if err := p.pullCommand(ctx, r, tr, actor, c.CreatedAt, c.UpdatedAt, PullComment{Kind: store.TriggerComment, EventID: c.ID,
			Number: c.IssueNumber, Actor: c.User.Login, Text: c.Body, At: c.CreatedAt}); err != nil {
			return err
		}
		r.seenComment[c.ID] = c.UpdatedAt
		return nil
	}
	if !c.UpdatedAt.Equal(c.CreatedAt) {
		// Edited: what it said when it was made is not known.
		if err := p.refuse(ctx, r, tr, RefusedEdited); err != nil {
			return err
		}
		r.seenComment[c.ID] = c.UpdatedAt
		return nil
	}
	if err := p.trigger(ctx, r, tr, actor, c.CreatedAt, Trigger{Kind: store.TriggerComment, Actor: c.User.Login, Text: c.Body}, is); err != nil {
		return err
	}
	r.seenComment[c.ID] = c.UpdatedAt
	return nil
}

// reviewComment handles one review comment of the feed: a command by an
// authorised author goes to the follow-up path with its file, line and
// diff hunk.
func (p *Poller) reviewComment(ctx context.Context, r *repoState, c github.ReviewComment) error {
	if seen, ok := r.seenReview[c.ID]; ok && seen.Equal(c.UpdatedAt) {
		return nil
	}
	actor := Actor{Login: c.User.Login, Type: c.User.Type}
	if !StartsWithCommand(c.Body, r.Settings.Command) || c.CreatedAt.Before(r.notBefore(&r.reviews)) ||
		!Authorize(Permission{Permission: permissionAdmin, RoleName: "admin"}, actor, p.bot).Start {
		r.seenReview[c.ID] = c.UpdatedAt
		return nil
	}
	tr := store.Trigger{RepositoryID: r.ID, Kind: store.TriggerReviewComment, EventID: c.ID, Number: int64(c.PullNumber), Actor: c.User.Login}
	if err := p.pullCommand(ctx, r, tr, actor, c.CreatedAt, c.UpdatedAt, PullComment{Kind: store.TriggerReviewComment, EventID: c.ID,
		Number: c.PullNumber, Actor: c.User.Login, Text: c.Body, Path: c.Path, Line: c.Line, DiffHunk: c.DiffHunk, At: c.CreatedAt}); err != nil {
		return err
	}
	r.seenReview[c.ID] = c.UpdatedAt
	return nil
}

// pullCommand hands a command on a pull request, made by actor at
// created and last changed at updated, to the follow-up path when the
// actor may write and the comment was not edited (what it said when
// written is not known otherwise), and answers what it decided.
func (p *Poller) pullCommand(ctx context.Context, r *repoState, tr store.Trigger, actor Actor, created, updated time.Time, c PullComment) error {
	d, err := p.authorize(ctx, r, actor, true)
	if err != nil || !d.Start {
		return err
	}
	if !updated.Equal(created) {
		return p.refuse(ctx, r, tr, RefusedEdited)
	}
	res, err := p.sink.Followup(ctx, r.Repo, c)
	if err != nil {
		return err
	}
	return p.followedUp(ctx, r, tr, res)
}

// authorize asks GitHub for actor's permission (fresh when fresh is set,
// else an answer up to permissionTTL old) and applies Authorize.
func (p *Poller) authorize(ctx context.Context, r *repoState, actor Actor, fresh bool) (Decision, error) {
	if d := Authorize(Permission{Permission: permissionAdmin, RoleName: "admin"}, actor, p.bot); !d.Start {
		return d, nil
	}
	key := strings.ToLower(actor.Login)
	if e, ok := r.perms[key]; ok && !fresh && p.now().Sub(e.at) < permissionTTL {
		return e.d, nil
	}
	perm, err := p.api.Permission(ctx, r.tok, r.Owner, r.Name, actor.Login)
	if err != nil {
		return Decision{}, err
	}
	d := Authorize(Permission{Permission: perm.Permission, RoleName: perm.RoleName}, actor, p.bot)
	r.perms[key] = permEntry{d: d, at: p.now()}
	return d, nil
}

// trigger handles a candidate trigger tr made by actor at time at: a
// trigger stored before is only answered again (reaction, status: both
// idempotent); an unauthorised actor starts nothing and hears nothing;
// otherwise the issue must be as it was at the trigger (its updated_at
// not later), and the job is submitted with the instruction built from
// it. is, when set, is the issue already read.
func (p *Poller) trigger(ctx context.Context, r *repoState, tr store.Trigger, actor Actor, at time.Time, t Trigger, is *github.Issue) error {
	if job, ok, err := p.st.TriggerJob(ctx, r.ID, tr.Kind, tr.EventID); err != nil || ok {
		if !ok {
			return err
		}
		// Answered before when the status comment reports it (or a later
		// job): the reaction went first.
		if sc, found, err := p.st.IntakeStatus(ctx, r.ID, tr.Number); err != nil || found && sc.JobID >= job {
			return err
		}
		return p.answered(ctx, r, tr, job)
	}
	d, err := p.authorize(ctx, r, actor, true)
	if err != nil {
		return err
	}
	if !d.Start {
		p.log.Info("intake: trigger not authorised", "repository", r.ID, "kind", tr.Kind, "event", tr.EventID,
			"number", tr.Number, "reason", d.Reason)
		return nil
	}
	if is == nil {
		if is, err = p.api.GetIssue(ctx, r.tok, r.Owner, r.Name, int(tr.Number)); err != nil {
			return err
		}
	}
	if is.UpdatedAt.After(at) {
		// Something changed after the trigger (an edit of the title or
		// body among them, which GitHub's REST API does not date): the
		// text as it was then is not known, so nothing starts.
		return p.refuse(ctx, r, tr, RefusedChanged)
	}
	comments, err := p.earlierComments(ctx, r, is.Number, tr, at)
	if err != nil {
		return err
	}
	base, err := p.api.BranchHead(ctx, r.tok, r.Owner, r.Name, r.DefaultBranch)
	if err != nil {
		return err
	}
	instruction := Instruction(Issue{Repository: r.Owner + "/" + r.Name, Number: is.Number, Title: is.Title, Body: is.Body,
		Author: is.User.Login, Comments: comments, Trigger: t})
	job, taken, err := p.sink.Submit(ctx, r.Repo, tr, instruction, base)
	if err != nil {
		return err
	}
	p.log.Info("intake: job started", "repository", r.ID, "kind", tr.Kind, "event", tr.EventID, "number", tr.Number,
		"job", job, "taken", taken)
	return p.answered(ctx, r, tr, job)
}

// earlierComments are the comments of issue number made and last edited
// no later than the trigger (never the trigger itself), by authors
// Authorize accepts, at most the MaxComments latest such.
func (p *Poller) earlierComments(ctx context.Context, r *repoState, number int, tr store.Trigger, at time.Time) ([]Comment, error) {
	all, err := p.api.IssueComments(ctx, r.tok, r.Owner, r.Name, number)
	if err != nil {
		return nil, err
	}
	var before []github.IssueComment
	for _, c := range all {
		if (tr.Kind == store.TriggerComment && c.ID == tr.EventID) || c.CreatedAt.After(at) || c.UpdatedAt.After(at) {
			continue
		}
		before = append(before, c)
	}
	if len(before) > MaxComments {
		before = before[len(before)-MaxComments:]
	}
	var out []Comment
	for _, c := range before {
		d, err := p.authorize(ctx, r, Actor{Login: c.User.Login, Type: c.User.Type}, false)
		if err != nil {
			return nil, err
		}
		if d.Start {
			out = append(out, Comment{Author: c.User.Login, Body: c.Body})
		}
	}
	return out, nil
}

// followedUp answers a command on a pull request as the follow-up path
// decided: the job's status on the pull request, or the refusal.
func (p *Poller) followedUp(ctx context.Context, r *repoState, tr store.Trigger, res FollowupResult) error {
	switch {
	case res.JobID != "":
		return p.answered(ctx, r, tr, res.JobID)
	case validKey(res.Refusal) && res.Text != "":
		return p.refuseWith(ctx, r, tr, res.Refusal, res.Text)
	}
	return nil
}

// answered reacts to trigger tr (GitHub keeps one reaction of a kind per
// account: a repeat is harmless) and makes sure the issue's status
// comment reports job.
func (p *Poller) answered(ctx context.Context, r *repoState, tr store.Trigger, job string) error {
	target, id := reactionTarget(tr)
	if err := p.api.AddReaction(ctx, r.tok, r.Owner, r.Name, target, id, github.ReactionEyes); err != nil {
		return err
	}
	return p.track(ctx, r, tr.Number, job)
}

// reactionTarget is what a reaction to trigger tr goes on: the issue of a
// label, the comment of a command.
func reactionTarget(tr store.Trigger) (string, int64) {
	switch tr.Kind {
	case store.TriggerComment:
		return github.ReactComment, tr.EventID
	case store.TriggerReviewComment:
		return github.ReactReviewComment, tr.EventID
	}
	return github.ReactIssue, tr.Number
}
