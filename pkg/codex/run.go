package codex

import (
	"bufio"
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

// Defaults used when the corresponding Config field is zero.
const (
	DefaultBin         = "codex"
	DefaultOutputLimit = 64 << 20 // combined stdout+stderr bytes of one run
	// DefaultKillGrace is supervise's default: the subreaper wrapper
	// escalates and sweeps within it, so supervise never SIGKILLs a
	// wrapper that is still cleaning up.
	DefaultKillGrace = supervise.DefaultKillGrace
	maxTimeoutMargin = 5 * time.Second
)

// Progress texts: fixed lifecycle wording, never executor output.
const (
	TextStarted   = "codex started"
	TextWorking   = "codex editing"
	TextFinalized = "codex finished"
)

// Reason is a fixed, value-free description of why a run failed.
type Reason string

// Failure reasons.
const (
	ReasonWorkspace       Reason = "workspace is not a directory"
	ReasonUnavailable     Reason = "codex executable not found"
	ReasonStart           Reason = "codex could not be started"
	ReasonSetup           Reason = "private run directory could not be prepared"
	ReasonAuth            Reason = "codex authentication source is not an absolute directory with a readable auth.json of at most 1 MiB"
	ReasonProviderKey     Reason = "codex provider key variable is not set"
	ReasonExit            Reason = "codex exited unsuccessfully"
	ReasonTimeout         Reason = "codex timed out"
	ReasonOutputLimit     Reason = "codex output exceeded its budget"
	ReasonMalformedEvents Reason = "codex event stream malformed"
	ReasonProviderFailed  Reason = "codex reported a failed turn"
	ReasonNoCompletion    Reason = "codex ended without completing its turn"
	ReasonCancelled       Reason = "codex run cancelled"
)

// Error is a failed run. Its text is the fixed Reason only.
type Error struct {
	Reason Reason
}

func (e *Error) Error() string { return "codex: " + string(e.Reason) }

// Category maps the failure onto a protocol v1 failure category.
func (e *Error) Category() plugin.Category {
	switch e.Reason {
	case ReasonWorkspace:
		return plugin.CategoryInvalidRequest
	case ReasonUnavailable, ReasonStart, ReasonAuth, ReasonProviderKey:
		return plugin.CategoryIncompatible
	case ReasonCancelled:
		return plugin.CategoryCancelled
	}
	return plugin.CategoryExecutionFailed
}

// CategoryOf returns the failure category of any error Run returned.
func CategoryOf(err error) plugin.Category {
	var e *Error
	if errors.As(err, &e) {
		return e.Category()
	}
	return plugin.CategoryExecutionFailed
}

// Config is how runs are started; the zero value of every optional field
// selects its default.
type Config struct {
	// Bin is the CODEX_BIN value: a path (containing "/"), or a name looked
	// up in the PATH of Env. Empty means DefaultBin.
	Bin string
	// Env is Codex's complete environment (KEY=value).
	Env []string
	// Reaper, when set, runs Codex under one of the pool's Linux
	// child-subreaper wrappers, so descendants that left its process group
	// are cleaned up before Run returns.
	Reaper *supervise.ReaperPool
	// OutputLimit is the combined stdout+stderr budget in bytes.
	OutputLimit int64
	// KillGrace is the delay between SIGTERM and SIGKILL to Codex's group.
	KillGrace time.Duration
	// TempDir is the parent of the private run directory; "" means the
	// system default.
	TempDir string
	// AuthSource is the operator's Codex home (the CODEX_HOME the plugin
	// was given): only its auth.json is read, and copied into the run's
	// private CODEX_HOME. "" means no authentication file.
	AuthSource string
	// Profile is the operator's model and provider choice.
	Profile Profile
}

// Request is one workspace edit.
type Request struct {
	Workspace   string // absolute path of the Git worktree
	Instruction string
	Timeout     time.Duration
	Want        Want
}

// Outcome is a completed run. The description fields hold only valid,
// wanted values; the rest is local diagnostics.
type Outcome struct {
	Description
	SubjectDropped bool // a subject was wanted but none valid was given
	ReportDropped  bool // a report was wanted but none valid was given
	UnknownEvents  int
	ErrorEvents    int // error events (retried streams); diagnostics only
	ErrorItems     int // error items (transport fallbacks); diagnostics only
}

// Progress reports one fixed lifecycle step; errors are ignored (progress
// may be closed or not negotiated).
type Progress func(stage plugin.Stage, text string) error

// Resolve finds the Codex executable for bin ("" = DefaultBin) in the PATH
// of env, or checks the path bin names. Only regular executable files
// count; relative PATH entries are skipped.
func Resolve(bin string, env []string) (string, error) {
	if bin == "" {
		bin = DefaultBin
	}
	if strings.Contains(bin, "/") {
		abs, err := filepath.Abs(bin)
		if err == nil && executable(abs) {
			return abs, nil
		}
		return "", &Error{Reason: ReasonUnavailable}
	}
	for _, dir := range filepath.SplitList(lookupEnv(env, "PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, bin); executable(p) {
			return p, nil
		}
	}
	return "", &Error{Reason: ReasonUnavailable}
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && syscall.Access(p, 1 /* X_OK */) == nil
}

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// codexTimeout leaves the plugin a margin before the Worker's deadline.
func codexTimeout(t time.Duration) time.Duration {
	return t - min(t/10, maxTimeoutMargin)
}

// Run performs one workspace edit with Codex. See the package
// documentation for the argv, the prompt, the outcome rules and the
// failure categories. progress may be nil.
func Run(ctx context.Context, cfg Config, req Request, progress Progress) (Outcome, error) {
	if progress == nil {
		progress = func(plugin.Stage, string) error { return nil }
	}
	if ctx.Err() != nil {
		return Outcome{}, &Error{Reason: ReasonCancelled}
	}
	if fi, err := os.Stat(req.Workspace); err != nil || !fi.IsDir() || !filepath.IsAbs(req.Workspace) {
		return Outcome{}, &Error{Reason: ReasonWorkspace}
	}
	bin, err := Resolve(cfg.Bin, cfg.Env)
	if err != nil {
		return Outcome{}, err
	}
	if pr := cfg.Profile.Provider; pr != nil && pr.EnvKey != "" && lookupEnv(cfg.Env, pr.EnvKey) == "" {
		return Outcome{}, &Error{Reason: ReasonProviderKey}
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "forge-codex-")
	if err != nil {
		return Outcome{}, &Error{Reason: ReasonSetup}
	}
	defer removeAll(dir)
	home, err := makeHome(dir, cfg.AuthSource, cfg.Profile)
	if err == errAuth {
		return Outcome{}, err
	} else if err != nil {
		return Outcome{}, &Error{Reason: ReasonSetup}
	}
	schema, last := filepath.Join(dir, SchemaFile), filepath.Join(dir, LastMessageFile)
	if req.Want.Structured() {
		if err := os.WriteFile(schema, Schema(req.Want), 0o600); err != nil {
			return Outcome{}, &Error{Reason: ReasonSetup}
		}
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = DefaultOutputLimit
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	p, err := supervise.Start(ctx, supervise.Command{
		Path:        bin,
		Args:        Args(req.Workspace, req.Want, schema, last),
		Env:         withEnv(cfg.Env, "CODEX_HOME", home),
		Dir:         req.Workspace,
		Reaper:      cfg.Reaper,
		OutputLimit: cfg.OutputLimit,
		Timeout:     codexTimeout(req.Timeout),
		KillGrace:   cfg.KillGrace,
	})
	if err != nil {
		return Outcome{}, &Error{Reason: ReasonStart}
	}
	defer p.Close()
	_ = progress(plugin.StageStarted, TextStarted)
	prompt := Prompt(req.Instruction, req.Want)
	go func() {
		io.WriteString(p.Stdin(), prompt) // EPIPE when Codex exits early
		p.Stdin().Close()
	}()

	var s Stream
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		readEvents(p, &s, func() { _ = progress(plugin.StageWorking, TextWorking) })
	}()
	exit, reason := p.Wait()
	drain := time.NewTimer(cfg.KillGrace)
	select {
	case <-readDone:
	case <-drain.C:
		p.CloseStdout() // a leftover descendant still holds stdout open
		<-readDone
	}
	drain.Stop()

	switch {
	case ctx.Err() != nil:
		return Outcome{}, &Error{Reason: ReasonCancelled}
	case errors.Is(reason, supervise.ErrTimeout):
		return Outcome{}, &Error{Reason: ReasonTimeout}
	case errors.Is(reason, supervise.ErrOutputLimit):
		return Outcome{}, &Error{Reason: ReasonOutputLimit}
	case s.Malformed:
		return Outcome{}, &Error{Reason: ReasonMalformedEvents}
	case reason != nil || !exit.Success():
		return Outcome{}, &Error{Reason: ReasonExit}
	}
	if err := s.Verdict(); err != nil {
		return Outcome{}, err
	}
	_ = progress(plugin.StageFinalizing, TextFinalized)
	out := Outcome{UnknownEvents: s.Unknown, ErrorEvents: s.Errors, ErrorItems: s.ErrorItems}
	if req.Want.Structured() {
		out.Description = ParseFinal(readBounded(last, FinalMessageBytes), req.Want)
		out.SubjectDropped = req.Want.Subject && out.CommitSubject == ""
		out.ReportDropped = req.Want.Report && !out.HasReport()
	}
	return out, nil
}

// readEvents feeds stdout to the stream line by line, each line bounded
// by MaxEventBytes. On a malformed or overlong line it stops Codex and
// discards the rest. It returns at stdout EOF or on a read error
// (including the output budget).
func readEvents(p *supervise.Process, s *Stream, firstTurn func()) {
	r := bufio.NewReaderSize(p.Stdout(), 64<<10)
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxEventBytes+1 {
			s.Malformed = true
		} else {
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			if !s.Malformed {
				continue
			}
		} else if err == nil && !s.Malformed {
			if s.Observe(line[:len(line)-1]) {
				firstTurn()
			}
			line = line[:0]
		}
		if s.Malformed {
			p.Terminate()
			io.Copy(io.Discard, r)
			return
		}
		if err != nil {
			// EOF: a final line without LF is not a complete event.
			if len(line) > 0 {
				s.Malformed = true
			}
			return
		}
	}
}

// readBounded returns the file's content, or nil when it is missing,
// unreadable, not a regular file or longer than limit.
func readBounded(path string, limit int64) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(data)) > limit {
		return nil
	}
	return data
}
