package worker

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// zeroSHA as update-ref's old value means "the ref must not exist".
const zeroSHA = "0000000000000000000000000000000000000000"

// CandidateRef is the deterministic ref of an attempt's candidate.
func CandidateRef(jobID, attemptID string) string { return wire.CandidateRef(jobID, attemptID) }

// commit makes the candidate commit from the staged tree and pins it with
// the candidate ref (created only if absent).
func (j *codingJob) commit(ctx context.Context, tree string, subject *string) (string, outcome, bool) {
	const P = evidence.PhaseCandidateCommit
	msg := DefaultSubject
	if subject != nil {
		msg = *subject
	}
	authorName, authorEmail := ForgeName, ForgeEmail
	if j.task.CommitAuthorName != "" {
		authorName, authorEmail = j.task.CommitAuthorName, j.task.CommitAuthorEmail
	}
	date := strconv.FormatInt(j.x.opt.Now().Unix(), 10) + " +0000"
	env := []string{
		"GIT_AUTHOR_NAME=" + authorName, "GIT_AUTHOR_EMAIL=" + authorEmail, "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + ForgeName, "GIT_COMMITTER_EMAIL=" + ForgeEmail, "GIT_COMMITTER_DATE=" + date,
	}
	out, err := j.git.Run(ctx, gitx.Cmd{GitDir: j.objectsGitDir(), Env: env,
		Args: []string{"commit-tree", tree, "-p", j.task.BaseSHA, "-m", msg}})
	sha := strings.TrimSuffix(string(out), "\n")
	if err != nil || !ident.ValidSHA(sha) {
		return "", j.fail(P, evidence.ReasonCommitFailed, codeCodingRetryable), false
	}
	// Git silently trims some characters from identities; the candidate
	// must carry exactly the requested ones, so read them back.
	hdr, err := j.git.Run(ctx, gitx.Cmd{GitDir: j.objectsGitDir(), Args: []string{"cat-file", "commit", sha}})
	if err != nil {
		return "", j.fail(P, evidence.ReasonCommitFailed, codeCodingRetryable), false
	}
	if !identitiesExact(hdr, authorName+" <"+authorEmail+"> "+date, ForgeName+" <"+ForgeEmail+"> "+date) {
		return "", j.fail(P, evidence.ReasonCommitFailed, codeCodingTerminal), false
	}
	ref := CandidateRef(j.lease.JobID, j.lease.AttemptID)
	create := j.createCandidate
	if j.gate {
		create = j.createOwnCandidate
	}
	if err := create(ctx, ref, sha); err != nil {
		return "", j.fail(P, evidence.ReasonRefFailed, codeCodingRetryable), false
	}
	return sha, outcome{}, true
}

// identitiesExact reports whether a raw commit's author and committer
// lines are exactly the given values.
func identitiesExact(raw []byte, author, committer string) bool {
	head, _, _ := strings.Cut(string(raw), "\n\n")
	var a, c int
	for _, line := range strings.Split(head, "\n") {
		switch {
		case strings.HasPrefix(line, "author "):
			a++
			if line != "author "+author {
				return false
			}
		case strings.HasPrefix(line, "committer "):
			c++
			if line != "committer "+committer {
				return false
			}
		}
	}
	return a == 1 && c == 1
}

// createOwnCandidate creates the candidate ref in the stage repository
// (a Gate registration; never the attempt's own, which the agent
// writes), only if absent: the bundle the Gate receives names it.
func (j *codingJob) createOwnCandidate(ctx context.Context, ref, sha string) error {
	_, err := j.git.Run(ctx, gitx.Cmd{GitDir: j.stageGitDir(), Args: []string{"update-ref", "--no-deref", ref, sha, zeroSHA}})
	return err
}

// sendCandidate bundles the candidate (its ref, the base its only
// prerequisite) and uploads it to the Gate, which verifies and stores it.
// A refusal fails the attempt: too large or refused terminally, a lost
// lease or an unreachable Gate as retryable.
func (j *codingJob) sendCandidate(ctx context.Context, sha, tree string) (outcome, bool) {
	const P = evidence.PhaseCandidateCommit
	ref := CandidateRef(j.lease.JobID, j.lease.AttemptID)
	file := filepath.Join(j.gitHome, "candidate.bundle")
	if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: j.stageGitDir(),
		Args: []string{"bundle", "create", "--quiet", file, ref, "^" + j.task.BaseSHA}}); err != nil {
		return j.fail(P, evidence.ReasonRefFailed, codeCodingRetryable), false
	}
	defer os.Remove(file)
	if j.attempt.Gate == nil {
		return j.fail(P, evidence.ReasonRefFailed, codeCodingRetryable), false
	}
	tctx, cancel := context.WithTimeout(ctx, j.git.Timeout)
	defer cancel()
	err := j.attempt.Gate.PutCandidate(tctx, sha, tree, file)
	switch status := linkStatus(err); {
	case err == nil:
		return outcome{}, true
	case status == http.StatusRequestEntityTooLarge:
		return j.fail(P, evidence.ReasonRefFailed, wire.FailureCandidateTooLarge), false
	case status == http.StatusUnprocessableEntity:
		return j.fail(P, evidence.ReasonRefFailed, wire.FailureCandidateRefused), false
	default:
		return j.fail(P, evidence.ReasonRefFailed, codeCodingRetryable), false
	}
}
