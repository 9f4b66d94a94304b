package worker

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// checkOutputBudget is the supervise budget of a scoped check. Capture is
// bounded by check_output_bytes (and then redacted); the budget itself is
// effectively unlimited so that a chatty check is never killed for its
// output, only reported as truncated.
const checkOutputBudget = 1 << 62

// runChecks runs the task's scoped checks in order against the staged
// tree, stopping at the first that does not pass. On success it returns
// the passed checks (their SHA is set once the candidate exists); on
// failure the records (bound to the base) are already added.
func (j *codingJob) runChecks(ctx context.Context) ([]evidence.Check, outcome, bool) {
	tests := j.task.Tests
	if len(tests) == 0 {
		return nil, outcome{}, true
	}
	tr := j.attempt.Stages // live activity (activity.go)
	tr.ChecksStarted(len(tests))
	defer tr.ChecksEnded()
	var done []evidence.Check
	for i, argv := range tests {
		c := j.runCheck(ctx, i, argv)
		if ctx.Err() != nil {
			return nil, outcome{report: Report{Cancelled: true, Code: CodeWorkerShutdown}}, false
		}
		done = append(done, c)
		if c.Reason != evidence.ReasonPassed {
			for _, d := range done {
				d.SHA = j.task.BaseSHA
				j.records = append(j.records, evidence.CheckRecord(d))
			}
			if c.Reason == evidence.ReasonSurvivors {
				j.survivors = true // its directories stay as they are
				return nil, outcome{report: Report{Code: CodeExecutionFailed}}, false
			}
			if c.Reason == evidence.ReasonPathEscape {
				// The agent made the check's program lead out of the
				// workspace: nothing ran.
				return nil, outcome{report: Report{Code: wire.FailureWorkspaceViolation}}, false
			}
			return nil, outcome{report: Report{Code: CodeScopedTestFailed}}, false
		}
	}
	return done, outcome{}, true
}

// runCheck runs one check in its own process group with a private HOME,
// TMPDIR and XDG_CACHE_HOME and only the check allowlist's variables.
func (j *codingJob) runCheck(ctx context.Context, index int, argv []string) evidence.Check {
	c := evidence.Check{Index: index, ArgCount: len(argv), Reason: evidence.ReasonSpawnFailed}
	start := j.x.opt.Now()
	priv, err := os.MkdirTemp(j.x.cfg.RuntimeRoot, "check-")
	if err != nil {
		c.DurationMS = j.x.opt.Now().Sub(start).Milliseconds()
		return c
	}
	defer os.RemoveAll(priv)
	env := []string{}
	for _, name := range j.x.cfg.CheckEnvironmentAllowlist {
		if name == "HOME" || name == "TMPDIR" || name == "XDG_CACHE_HOME" {
			continue
		}
		if v, ok := j.x.opt.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	dirs := map[string]string{"HOME": "home", "TMPDIR": "tmp", "XDG_CACHE_HOME": "cache"}
	for _, name := range []string{"HOME", "TMPDIR", "XDG_CACHE_HOME"} {
		d := filepath.Join(priv, dirs[name])
		if err := os.Mkdir(d, 0o700); err != nil {
			c.DurationMS = j.x.opt.Now().Sub(start).Milliseconds()
			return c
		}
		env = append(env, name+"="+d)
	}
	connect, env := j.inv.checkEgress(env)
	prog, opened, refused := resolveProgram(argv[0], j.wt, env)
	if refused != "" {
		c.Reason = refused
		if refused == evidence.ReasonPathEscape {
			j.log().Warn("scoped check refused: its program leads out of the workspace", "check", index)
		}
		c.DurationMS = j.x.opt.Now().Sub(start).Milliseconds()
		return c
	}
	cmd := supervise.Command{
		Path: prog, Args: argv[1:], Env: env, Dir: j.wt, Reaper: j.x.opt.Reaper,
		Sandbox:     reaching(j.x.sb.policy(j.boxDirs.with(priv)), connect, j.inv.refusals),
		OutputLimit: checkOutputBudget, StderrBytes: 1,
		Timeout: j.inv.exec.CheckTimeout.Std(), KillGrace: j.inv.exec.CleanupTimeout.Std(),
	}
	if opened != nil {
		defer opened.Close()
		if cmd.Sandbox != nil {
			cmd.Program = opened // executed as resolved here, whatever the name leads to by then
		}
	}
	p, err := supervise.Start(ctx, cmd)
	if err != nil {
		c.DurationMS = j.x.opt.Now().Sub(start).Milliseconds()
		return c
	}
	defer p.Close()
	p.Stdin().Close()
	counted := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, p.Stdout())
		counted <- n
	}()
	exit, reason := p.Wait()
	var stdoutBytes int64
	t := time.NewTimer(j.inv.exec.CleanupTimeout.Std())
	select {
	case stdoutBytes = <-counted:
	case <-t.C:
		p.CloseStdout() // a leftover process still holds stdout open
		stdoutBytes = <-counted
	}
	t.Stop()
	c.OutputBytes = stdoutBytes + p.StderrTotal()
	c.Truncated = c.OutputBytes > j.inv.exec.CheckOutputBytes
	switch {
	case errors.Is(reason, supervise.ErrSurvivors):
		c.Reason = evidence.ReasonSurvivors
	case errors.Is(reason, supervise.ErrTimeout):
		c.Reason = evidence.ReasonTimedOut
	case reason != nil:
		c.Reason = evidence.ReasonSignalled
	case exit.Signal != 0:
		c.Reason = evidence.ReasonSignalled
	case exit.Code == 0:
		c.Reason = evidence.ReasonPassed
	case exit.Code >= 1 && exit.Code <= 255:
		c.Reason, c.ExitCode = evidence.ReasonFailed, exit.Code
	default:
		c.Reason = evidence.ReasonSignalled
	}
	c.DurationMS = j.x.opt.Now().Sub(start).Milliseconds()
	return c
}

// resolveProgram finds a check's program: a bare name is searched on
// the check environment's PATH (absolute entries only), never the
// Worker's; a name with a slash is an absolute path, or is relative to
// the worktree and then opened beneath it (opened), resolved by the
// kernel so that no symbolic link, "..", or magic link leads out of the
// worktree: one that does is path_escape, the agent having made it so.
// A name that names no executable regular file is spawn_failed.
func resolveProgram(name, wt string, env []string) (path string, opened *os.File, reason evidence.Reason) {
	if strings.ContainsRune(name, '/') {
		if filepath.IsAbs(name) {
			if !isExecutable(name) {
				return "", nil, evidence.ReasonSpawnFailed
			}
			return name, nil, ""
		}
		f, err := openInWorktree(wt, name)
		if errors.Is(err, sandbox.ErrOutside) {
			return "", nil, evidence.ReasonPathEscape
		}
		if err != nil {
			return "", nil, evidence.ReasonSpawnFailed
		}
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			f.Close()
			return "", nil, evidence.ReasonSpawnFailed
		}
		return filepath.Join(wt, name), f, ""
	}
	var pathEnv string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if isExecutable(p) {
			return p, nil, ""
		}
	}
	return "", nil, evidence.ReasonSpawnFailed
}

// openInWorktree opens name beneath the worktree wt, which is itself
// opened from its container without following a link (the agent may
// have put one in its place).
func openInWorktree(wt, name string) (*os.File, error) {
	c, err := openDirNoFollow(filepath.Dir(wt))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	tree, err := openDirAt(c, filepath.Base(wt))
	if err == errSymlink {
		return nil, sandbox.ErrOutside
	}
	if err != nil {
		return nil, err
	}
	defer tree.Close()
	return sandbox.OpenBeneath(tree, name)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
