// Package intake is the Gate's side of work that starts on GitHub
// (DECISIONS 17, 18): a repository's intake settings (Config), the rule
// that decides whether a GitHub actor may start a job (Authorize), which
// comments are commands (StartsWithCommand), and the fixed frame that
// turns an issue, frozen at trigger time, into a job's instruction
// (Instruction). Triggers are stored once by
// store.SubmitTrigger, with the job they start.
//
// # Trust
//
// Everything read from GitHub is data from outside. An issue's text
// reaches the agent only through Instruction: HTML comments (hidden when
// GitHub renders the text) removed, control and invisible formatting
// characters (Forbidden) stripped, each part and the whole bounded (the
// Max* constants), between two marker lines whose token is derived from
// the text they enclose, so the text cannot close the frame early. The
// result is a deterministic function of its input.
//
// A trigger starts work only when GitHub's collaborator-permission answer
// for its actor says write or better and the actor is no bot (Authorize);
// author association, label rights and bot accounts, the Gate's own
// included, never authorise.
//
// # Polling
//
// Poller reads each repository's issue and comment feeds through
// pkg/github (conditional, cursors stored, paced on the installation's
// budget by its Sink), finds the label and command triggers, asks each
// actor's collaborator permission, refuses an issue that changed after
// its trigger (updated_at later than the trigger: the text then is not
// known), submits the job through its Sink with the trigger in one
// transaction, reacts to the trigger and keeps one status comment per
// issue (JobStatus says what it says). Commands on pull requests go to
// the Sink's follow-up path (docs/intake.md).
package intake
