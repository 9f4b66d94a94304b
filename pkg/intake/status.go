package intake

import (
	"context"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// StatusMarker opens every status comment (hidden when GitHub renders
// it): the Gate finds its own comment by it, and by its author, after an
// answer to a creation was lost.
const StatusMarker = "<!-- agent-forge:status -->"

// Reasons a trigger by an authorised actor starts nothing; each is said
// in the issue's status comment.
const (
	RefusedChanged = "changed_after_trigger" // the issue changed after the trigger: its text then is not known
	RefusedEdited  = "comment_edited"        // the command comment was edited before the Gate read it
)

// Status keys: what a status comment says, stored as Posted (a key, not
// the text, so the text may improve without a re-edit of every comment).
const (
	postedAccepted = "accepted"
	postedRunning  = "running"
	postedPR       = "pr"
	postedMerged   = "merged"
	postedFailed   = "failed"
	postedRefused  = "refused"
)

// track makes sure issue number's status comment reports job: a newer job
// than the one it reports (job ids sort by submit time) takes it over; the
// same job changes nothing.
func (p *Poller) track(ctx context.Context, r *repoState, number int64, job string) error {
	sc, ok, err := p.st.IntakeStatus(ctx, r.ID, number)
	if err != nil || ok && sc.JobID != "" && sc.JobID >= job {
		return err
	}
	sc.RepositoryID, sc.Number, sc.JobID, sc.Posted, sc.Final, sc.UpdatedAt = r.ID, number, job, "", false, p.now()
	if err := p.st.SetIntakeStatus(ctx, sc); err != nil {
		return err
	}
	return p.updateStatus(ctx, r, sc)
}

// refuse says on issue tr.Number why trigger tr starts nothing (once: the
// key names the trigger) and reacts "confused" to it.
func (p *Poller) refuse(ctx context.Context, r *repoState, tr store.Trigger, reason string) error {
	return p.refuseWith(ctx, r, tr, reason, refusalText(reason, tr.Kind, r.Settings))
}

// refuseWith is refuse with the status comment's text.
func (p *Poller) refuseWith(ctx context.Context, r *repoState, tr store.Trigger, reason, text string) error {
	key := postedRefused + ":" + reason + ":" + tr.Kind + ":" + strconv.FormatInt(tr.EventID, 10)
	sc, ok, err := p.st.IntakeStatus(ctx, r.ID, tr.Number)
	if err != nil || ok && sc.Posted == key {
		return err
	}
	if ok && sc.JobID != "" && !sc.Final {
		// A job of this issue is still reported: its comment keeps
		// reporting it; the refusal is only logged.
		p.log.Info("intake: trigger refused", "repository", r.ID, "number", tr.Number, "reason", reason)
		return nil
	}
	target, id := reactionTarget(tr)
	if err := p.api.AddReaction(ctx, r.tok, r.Owner, r.Name, target, id, github.ReactionConfused); err != nil {
		return err
	}
	sc.RepositoryID, sc.Number, sc.JobID, sc.Final, sc.UpdatedAt = r.ID, tr.Number, "", true, p.now()
	id, err = p.post(ctx, r, sc, text)
	if err != nil {
		return err
	}
	sc.CommentID, sc.Posted = id, key
	return p.st.SetIntakeStatus(ctx, sc)
}

// updateStatuses brings every open status comment up to date with its
// job, for the repositories of this Poller.
func (p *Poller) updateStatuses(ctx context.Context) {
	open, err := p.st.OpenIntakeStatuses(ctx)
	if err != nil {
		return
	}
	for _, sc := range open {
		for _, r := range p.repos {
			if r.ID == sc.RepositoryID && r.tok != nil {
				if err := p.updateStatus(ctx, r, sc); err != nil && ctx.Err() == nil {
					p.log.Warn("intake: status comment not updated", "repository", r.ID, "number", sc.Number, "error", err.Error())
				}
			}
		}
	}
}

// updateStatus edits sc's comment when its job moved on since it was
// last posted.
func (p *Poller) updateStatus(ctx context.Context, r *repoState, sc store.StatusComment) error {
	job, err := p.st.Job(ctx, sc.JobID)
	if err != nil {
		return err
	}
	key, text, final := JobStatus(job, r.Settings)
	if key == sc.Posted {
		return nil
	}
	id, err := p.post(ctx, r, sc, text)
	if err != nil {
		return err
	}
	sc.CommentID, sc.Posted, sc.Final, sc.UpdatedAt = id, key, final, p.now()
	return p.st.SetIntakeStatus(ctx, sc)
}

// post writes text as sc's comment: an edit of the comment it has; else
// (none yet, or deleted by a person) the Gate's own comment found on the
// issue, or a new one. The id of the comment written is returned.
func (p *Poller) post(ctx context.Context, r *repoState, sc store.StatusComment, text string) (int64, error) {
	body := StatusMarker + "\n" + text
	if sc.CommentID > 0 {
		_, err := p.api.EditIssueComment(ctx, r.tok, r.Owner, r.Name, sc.CommentID, body)
		if !github.IsClass(err, github.ClassNotFound) {
			return sc.CommentID, err
		}
	}
	// A creation whose answer was lost left a comment: adopt it.
	all, err := p.api.IssueComments(ctx, r.tok, r.Owner, r.Name, int(sc.Number))
	if err != nil {
		return 0, err
	}
	for _, c := range all {
		if p.bot != "" && strings.EqualFold(c.User.Login, p.bot) && strings.HasPrefix(c.Body, StatusMarker) {
			_, err := p.api.EditIssueComment(ctx, r.tok, r.Owner, r.Name, c.ID, body)
			return c.ID, err
		}
	}
	c, err := p.api.CreateIssueComment(ctx, r.tok, r.Owner, r.Name, int(sc.Number), body)
	if err != nil {
		return 0, err
	}
	return c.ID, nil
}

// JobStatus is what the status comment says of job, in a repository with
// settings s: its key, its text (no
// @-mention: logins are never written) and whether it is the last word.
func JobStatus(job store.Job, s Settings) (key, text string, final bool) {
	id := "`" + job.ID + "`"
	pr := ""
	if job.Delivery != nil && strings.HasPrefix(job.Delivery.PRURL, github.GitBase+"/") {
		pr = job.Delivery.PRURL
	}
	switch job.Status {
	case store.JobPending, store.JobRetryWait:
		return postedAccepted, "Agent Forge accepted this issue as job " + id + ". It waits for a Worker; this comment says how it goes.", false
	case store.JobLeased:
		return postedRunning + ":" + strconv.Itoa(job.AttemptCount), "Agent Forge is working on this issue: job " + id +
			", attempt " + strconv.Itoa(max(job.AttemptCount, 1)) + ".", false
	case store.JobDelivering:
		if pr == "" {
			return postedRunning + ":delivering", "Agent Forge has a change for this issue (job " + id + ") and is opening a pull request.", false
		}
		wait := "It is merged once CI passes for its exact commit."
		if s.Merge == MergeReview {
			wait = "Once CI passes, it waits for an approving review of its exact head by someone with write access who did not start the job; then it is merged at exactly that commit."
		}
		return postedPR, "Agent Forge opened " + pr + " for this issue (job " + id + "). " + wait, false
	case store.JobSucceeded:
		if pr == "" {
			return postedMerged, "Job " + id + " succeeded.", true
		}
		return postedMerged, "Agent Forge's pull request " + pr + " was merged (job " + id + ").", true
	case store.JobFailed:
		code := job.FailureCode
		if !validKey(code) {
			code = "unknown"
		}
		text := "Job " + id + " failed: `" + code + "`. " + FailureAdvice(code)
		if pr != "" {
			text += " The pull request " + pr + " stays as it is."
		}
		return postedFailed + ":" + code, text, true
	}
	return postedAccepted, "Agent Forge accepted this issue as job " + id + ".", false
}

// validKey: a code fit for a stored key and a comment.
func validKey(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// advice: what a maintainer does next after a failure code.
var advice = map[string]string{
	"ci_failed":                  "A CI run of the change failed. Read the runs on the pull request; to try again with more guidance, edit the issue, then remove the label and add it again.",
	"ci_no_runs":                 "No CI run started for the change, and untested work is never merged. Check the workflows' triggers (path filters, forge/job-* branches) and whether the pull request has a conflict.",
	"ci_timed_out":               "CI did not finish within the delivery timeout. Raise delivery.timeout in gate.json, or merge by hand after reading the runs.",
	"merge_refused":              "GitHub refused the merge (a conflict, branch protection, a merge queue). Resolve it on the pull request.",
	"pr_closed":                  "The pull request was closed without merging. Add the label again to start a new job.",
	"pr_refused":                 "GitHub refused the pull request; usually the change was already in the default branch.",
	"head_moved":                 "Someone pushed to the job's branch; nothing was merged. Look at the branch, then merge or close it by hand.",
	"pr_base_changed":            "The pull request targets another base than the default branch. Retarget or close it.",
	"push_rejected":              "GitHub refused the push of the job's branch (a ruleset or branch protection on forge/job-*). Relax the rule for those branches.",
	"workflow_permission_denied": "The change touches .github/workflows and the App may not change workflows. Ask for a change without workflow edits, or grant the App Workflows write.",
	"secret_in_candidate":        "The change held a secret of the Gate's, so nothing was pushed. The operator must find how it got there and rotate it.",
	"permission_denied":          "GitHub refused the App. The operator checks the App's permissions (docs/delivery.md).",
	"app_not_installed":          "The App is not installed on this repository.",
	"repository_not_found":       "GitHub answered that the repository or the pull request does not exist for the App. The operator checks repository_url and that the repository is still public.",
	"github_unavailable":         "GitHub did not answer well enough for too long. Add the label again later.",
	"delivery_timed_out":         "The delivery ran out of time. Add the label again later.",
	"delivery_unconfigured":      "The Gate restarted without delivery. The operator restores the delivery section; then add the label again.",
	"budget_exceeded":            "The job spent the repository's model budget. Narrow the issue, or have the operator raise the budget, then add the label again.",
	"max_attempts_exceeded":      "Every attempt of the agent failed. Make the issue more precise (what to change, how to check it), then remove the label and add it again.",
	"lease_expired":              "The Worker stopped answering. Add the label again; if it repeats, the operator checks the Workers.",
	"superseded":                 "A follow-up command on the pull request took it over: this job's commit stays on the branch and the follow-up's goes on top. Its progress is in the pull request's status comment.",
	"base_moved":                 "Someone pushed to the pull request's branch after the follow-up command, so nothing was pushed over their commit. Look at the branch; merge or close the pull request by hand, or add the label again.",
	"cancelled":                  "A person removed the label or closed the issue or pull request, which cancels the job. Add the label again to start over.",
}

// FailureAdvice says what to do after a job failed with code.
func FailureAdvice(code string) string {
	if a, ok := advice[code]; ok {
		return a
	}
	return "The operator can read the job's timeline (forge status with the job id). To try again, remove the label and add it again."
}

// refusalText says why a trigger started nothing and what to do.
func refusalText(reason, kind string, s Settings) string {
	again := "Remove the label `" + s.Label + "` and add it again"
	if kind == store.TriggerComment {
		again = "Write a new comment starting with `" + s.Command + "`"
	}
	switch reason {
	case RefusedChanged:
		return "Agent Forge did not start a job: the issue changed after the request (an edit, a comment or another event), so Agent Forge cannot tell what it said at that moment, and never works from text written after the request. " +
			again + " to start a job with the issue as it is now."
	case RefusedEdited:
		return "Agent Forge did not start a job: the command comment was edited before Agent Forge read it, so what it said when it was written is not known. " +
			again + "; edits to a command do not count."
	}
	return "Agent Forge did not start a job. " + again + " to try again."
}
