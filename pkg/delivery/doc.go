// Package delivery is the Gate's automatic delivery of a coding candidate:
// a durable state machine that pushes the candidate to the deterministic
// branch forge/job-<id>, creates or reconciles one pull request, waits for
// the GitHub Actions runs of the exact candidate SHA and merges the pull
// request with merge_method "merge" and sha = the candidate.
//
// # Phases
//
// A delivery is in exactly one phase:
//
//	push          scan the candidate for the Gate's secrets
//	              (CheckCandidate: secret_in_candidate, nothing pushed),
//	              then push it to refs/heads/forge/job-<id>, or for a
//	              follow-up job to its pull request's branch over the
//	              previous head (State.PushOver; base_moved otherwise)
//	pull_request  find the branch's pull request (head owner:branch,
//	              state all) or create it
//	ci            read the pull request (closed or merged by a person
//	              ends it) and poll GET /actions/runs?head_sha=<candidate>
//	              until the verdict of DECISIONS 12: a failure at once, a
//	              success only with the pull request no_runs_grace old and
//	              the same runs on two consecutive polls
//	review        merge policy "review" only (DECISIONS 18): read the pull
//	              request and its reviews until an authorised person who
//	              asked for none of its jobs approved exactly the
//	              candidate (Verdicts; intake.Authorize on the
//	              collaborator permission); not bounded by the timeout
//	merge         PUT /pulls/{n}/merge {sha: candidate, merge_method: merge}
//	merged        terminal: the job succeeded, MergeSHA recorded
//	failed        terminal: the job failed with one Code of the closed table
//
// Machine.Step performs the work of one phase (at most one mutation) and
// returns the next State; the caller commits that State before it calls
// Step again, so every transition is durable before the next side effect.
// Step is safe to repeat after a crash: push is idempotent (the branch
// already at the candidate is success), pull_request first looks for the
// branch's existing pull request, and merge first asks GitHub whether the
// pull request is already merged. A lost answer therefore never yields a
// second branch, pull request or merge.
//
// # Retries and time
//
// A transient failure (network, 5xx, malformed answer) retries only the
// failed phase, at most Config.MaxAttempts times per phase with the
// exponential back-off of Config.RetryBase; then the delivery fails with
// github_unavailable. A rate-limited answer waits as GitHub asks
// (retry-after, else the reset time when nothing remains, else at least a
// minute) without consuming an attempt. Config.Timeout bounds the whole
// delivery from its start; before failing on timeout in the merge phase the
// machine reconciles once, so a merge that happened is never reported as a
// failure.
//
// Installation tokens are minted per repository on demand, held in memory
// only (never in State) and replaced before their expires_at (tokenMargin).
// Every token of a delivery whose candidate changes .github/workflows
// carries workflows write (GitHub refuses the merge otherwise); whether it
// does is asked once per delivery and kept in memory (State.Workflows).
// Actions runs are read with a token holding only actions: read when the
// installation grants it (DECISIONS 16), else unauthenticated; the polls
// are paced per rate-limit budget (Token.Budget) from the x-ratelimit-*
// headers, and a free 304 of an authorized read reserves nothing.
//
// # Failure codes
//
// The closed table is Codes; docs/delivery.md says what each means and
// what the operator does next. A merge answered 405 "Base branch was
// modified" is retried after re-reading the pull request; any other
// refusal (409, another 405, 422, merged false) is final, after one more
// look at whether the pull request is merged.
package delivery
