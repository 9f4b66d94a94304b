package agent

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Defaults used when the corresponding Exec field is zero.
const (
	DefaultOutputLimit = 64 << 20 // combined stdout+stderr bytes of one run
	// DefaultKillGrace is supervise's default: the subreaper wrapper
	// escalates and sweeps within it, so supervise never SIGKILLs a
	// wrapper that is still cleaning up.
	DefaultKillGrace = supervise.DefaultKillGrace
	maxTimeoutMargin = 5 * time.Second
)

// Progress reports one fixed lifecycle step; errors are ignored (progress
// may be closed or not negotiated).
type Progress func(stage plugin.Stage, text string) error

// Exec is one start of an agent process and how its event stream is read.
type Exec struct {
	Agent string   // the adapter's name, in errors and progress text
	Path  string   // resolved executable (Resolve)
	Args  []string // after the program name
	Env   []string // the complete environment
	Dir   string   // working directory: the workspace
	Stdin string   // written to stdin, which is then closed ("" closes it at once)
	// Timeout is the request's; the agent gets a margin less (AgentTimeout).
	Timeout     time.Duration
	Reaper      *supervise.ReaperPool
	OutputLimit int64 // 0: DefaultOutputLimit
	KillGrace   time.Duration
	// MaxLineBytes bounds one event line; 0: DefaultMaxLineBytes.
	MaxLineBytes int
	// Classify reads one event line; an error makes the stream malformed.
	Classify func(line []byte) (Event, error)
	Rules    Rules
	// Secrets are values never kept in the raw tail (the provider key).
	Secrets []string
}

// Stream is what a finished run's event stream said.
type Stream struct {
	Verdict
	Tail []byte // bounded, redacted end of the raw stream
}

// AgentTimeout leaves the plugin a margin before the Worker's deadline (a
// tenth, at most 5 s), so it can stop the agent and answer in time.
func AgentTimeout(t time.Duration) time.Duration {
	return t - min(t/10, maxTimeoutMargin)
}

// Run starts the agent, feeds its stdout through the completion table and
// returns the stream once the agent is gone (its process group, and under
// the reaper its other descendants, stopped). It fails with a run error
// for a context that ended (cancelled), a timeout, the output budget, a
// malformed or rule-breaking stream, a refusal, a failed exit or a stream
// that did not complete; the first of these in that order wins. The agent
// is stopped as soon as the stream's outcome is decided against it.
// progress gets StageStarted once the agent runs and StageWorking at the
// first Begin, with the texts "<agent> started" and "<agent> editing".
func Run(ctx context.Context, x Exec, progress Progress) (Stream, error) {
	if progress == nil {
		progress = func(plugin.Stage, string) error { return nil }
	}
	fail := func(r Reason, tail *Tail) error {
		e := NewError(x.Agent, r)
		if tail != nil {
			e.Tail = tail.Bytes()
		}
		return e
	}
	if x.OutputLimit <= 0 {
		x.OutputLimit = DefaultOutputLimit
	}
	if x.KillGrace <= 0 {
		x.KillGrace = DefaultKillGrace
	}
	if x.MaxLineBytes <= 0 {
		x.MaxLineBytes = DefaultMaxLineBytes
	}
	p, err := supervise.Start(ctx, supervise.Command{
		Path:        x.Path,
		Args:        x.Args,
		Env:         x.Env,
		Dir:         x.Dir,
		Reaper:      x.Reaper,
		OutputLimit: x.OutputLimit,
		Timeout:     AgentTimeout(x.Timeout),
		KillGrace:   x.KillGrace,
	})
	if err != nil {
		return Stream{}, fail(ReasonStart, nil)
	}
	defer p.Close()
	_ = progress(plugin.StageStarted, x.Agent+" started")
	go func() {
		io.WriteString(p.Stdin(), x.Stdin) // EPIPE when the agent exits early
		p.Stdin().Close()
	}()

	tail := NewTail(DefaultTailBytes, x.Secrets...)
	var v Verdict
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		v.Malformed = readLines(p.Stdout(), x.MaxLineBytes, tail, func(line []byte) bool {
			ev, err := x.Classify(line)
			if err != nil {
				v.Malformed = true
				p.Terminate()
				return false
			}
			first, stop := v.Observe(x.Rules, ev)
			if first {
				_ = progress(plugin.StageWorking, x.Agent+" editing")
			}
			if stop {
				p.Terminate()
				return false
			}
			return true
		}) || v.Malformed
		if v.Malformed {
			p.Terminate()
		}
	}()
	exit, reason := p.Wait()
	drain := time.NewTimer(x.KillGrace)
	select {
	case <-readDone:
	case <-drain.C:
		p.CloseStdout() // a leftover descendant still holds stdout open
		<-readDone
	}
	drain.Stop()

	s := Stream{Verdict: v, Tail: tail.Bytes()}
	verdict := v.Reason()
	switch {
	case ctx.Err() != nil:
		return s, fail(ReasonCancelled, tail)
	case verdict == ReasonAuthRefused:
		return s, fail(verdict, tail)
	case errors.Is(reason, supervise.ErrTimeout):
		return s, fail(ReasonTimeout, tail)
	case errors.Is(reason, supervise.ErrOutputLimit):
		return s, fail(ReasonOutputLimit, tail)
	case verdict == ReasonMalformedEvents || verdict == ReasonUnexpectedEvent:
		return s, fail(verdict, tail)
	case reason != nil || !exit.Success():
		return s, fail(ReasonExit, tail)
	case verdict != "":
		return s, fail(verdict, tail)
	}
	return s, nil
}

// Resolve finds the agent executable for bin (def when empty) in the PATH
// of env, or checks the path bin names. Only regular executable files
// count; relative PATH entries are skipped.
func Resolve(agent, bin, def string, env []string) (string, error) {
	if bin == "" {
		bin = def
	}
	if strings.Contains(bin, "/") {
		abs, err := filepath.Abs(bin)
		if err == nil && executable(abs) {
			return abs, nil
		}
		return "", NewError(agent, ReasonUnavailable)
	}
	for _, dir := range filepath.SplitList(LookupEnv(env, "PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, bin); executable(p) {
			return p, nil
		}
	}
	return "", NewError(agent, ReasonUnavailable)
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && syscall.Access(p, 1 /* X_OK */) == nil
}

// LookupEnv returns the last binding of key in env ("" when unset).
func LookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// CheckWorkspace fails with ReasonWorkspace unless ws is an absolute path
// of a directory.
func CheckWorkspace(agent, ws string) error {
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() || !filepath.IsAbs(ws) {
		return NewError(agent, ReasonWorkspace)
	}
	return nil
}
