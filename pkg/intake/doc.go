// Package intake is the Gate's side of work that starts on GitHub
// (DECISIONS 17, 18): a repository's intake settings (Config) and the
// fixed frame that turns an issue, frozen at trigger time, into a job's
// instruction (Instruction).
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
// The poller that finds triggers, the rule that authorises their actors,
// the status comments and the follow-up jobs on pull requests are not
// built yet (docs/intake.md).
package intake
