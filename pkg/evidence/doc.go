// Package evidence is the contract for what a coding attempt may record as
// evidence: the record shape, the closed phase and reason values, the
// redaction rule, the limits, and the validation both ends apply. The
// Worker builds records with the constructors here; Gate validates every
// batch with ValidateBatch before the store binds it to the attempt, and
// the store keeps only the canonical bytes ValidateBatch returns.
//
// # Records
//
// A record is one JSON object. Every record has "phase" and "reason";
// the closed values are (phase: reasons):
//
//	preparation:          no_repository_roots, unknown_repository,
//	                      repository_path_drift, default_branch_mismatch,
//	                      base_missing, base_not_on_default_branch,
//	                      invalid_task, invalid_policy, policy_rejected,
//	                      plugin_rejected, worktree_failed, git_failed
//	plugin:               failed, timed_out, output_limit,
//	                      protocol_violation, spawn_failed, cancelled
//	workspace_validation: head_moved, refs_changed, config_changed,
//	                      git_dir_changed, path_escape, empty_change,
//	                      secret_in_candidate, git_failed
//	scoped_check:         passed, failed, signalled, timed_out, spawn_failed,
//	                      processes_survived, path_escape
//	candidate_commit:     created, commit_failed, ref_failed
//	cleanup:              cleanup_failed
//	network:              refused
//
// A candidate_commit/created record also has "sha": the candidate commit.
// A workspace_validation/secret_in_candidate record may have "path": the
// file of the change that holds a secret (ValidPath: printable ASCII, at
// most MaxPathBytes, relative; absent when the secret is in a path, the
// commit subject, the agent report or the evidence, or the name is not
// representable). The path is never the secret.
// A scoped_check record also has:
//
//	index            the task's check index (0-based, authoritative order)
//	sha              the commit the check is bound to (below)
//	exit_code        the exit status, only when the check exited by itself
//	                 (present for passed (0) and failed (1..255))
//	duration_ms      wall time, ≥ 0
//	arg_count        len(args)
//	args             one "[REDACTED]" per argv element of the task's check
//	output           "" when the check wrote nothing, else exactly
//	                 "[REDACTED]"
//	output_redacted  true exactly when output is "[REDACTED]"
//	output_truncated true when the output exceeded check_output_bytes
//	                 (bounded capture); implies output_redacted
//
// A network/refused record has only "refused_count" (1 to 2^40) and
// "refused": 1 to MaxDestinations objects {"host", "port", "count"}, a
// host being an IP address in canonical form or a lower-case DNS name
// (ValidHost), each destination once, their counts within the total. It
// sums up what the attempt's sandboxes and proxy refused and comes last in
// batch 1, after whatever ended the work.
//
// No other field exists and no other value of output is ever accepted:
// argv values, check output and secrets cannot be represented, and a path
// only where it names the file holding a secret.
//
// # Batches and limits
//
// Batch 1 carries the work's records in pipeline order (preparation,
// plugin, workspace_validation, scoped_check, candidate_commit); at most
// one record per phase except scoped_check, whose indexes run 0, 1, 2, …
// with every check but the last passed, and the last may have stopped the
// run. All checks in a batch name one sha: the candidate's when a
// candidate_commit/created record is present (checks pass before the
// commit is made from the exact tree they ran against), otherwise the
// base commit. Batch 2 is exactly one cleanup record. A batch holds 1 to
// MaxRecords records and at most MaxBatchBytes canonical bytes; an attempt
// holds at most MaxRecords records and MaxOutputBytes of output in total
// (CheckAttempt). Everything else fails closed with an *Error that names a
// field and a reason, never a value.
package evidence
