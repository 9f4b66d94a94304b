package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Config is one run of the suite against one plugin.
type Config struct {
	// Command is the plugin executable (a path, or a name looked up in
	// the PATH of Env) followed by its arguments.
	Command []string
	// Operation is the operation the valid sessions run.
	Operation plugin.Operation
	// Timeout bounds each scenario; a plugin still running then is
	// killed and the scenario fails with "timeout". It is also the
	// timeout_ms of workspace_edit requests.
	Timeout time.Duration
	// Env is the plugin's entire environment (KEY=value).
	Env []string
	// Match selects scenarios by name; nil runs all.
	Match func(name string) bool
	// TempDir is where the suite creates its private directory; "" means
	// the system default.
	TempDir string
	// Now is the clock used to measure the exit window; nil means
	// time.Now.
	Now func() time.Time
	// Random is the source of session ids; nil means crypto/rand.
	Random io.Reader
	// Reaper is a pool of reapers (see pkg/supervise): on Linux every
	// scenario, the host-runner session included, runs the plugin under
	// the Worker's child-subreaper wrapper, which sweeps all descendants
	// (setsid ones too) when the plugin exits. Nil runs the plugins
	// without the wrapper: only their process group is cleaned up.
	Reaper *supervise.ReaperPool
}

// DefaultTimeout is the per-scenario bound when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Result is the verdict on one scenario.
type Result struct {
	Name  string
	Class string
	// Err is nil when the scenario passed.
	Err error
	// Note explains a pass that did not apply to this plugin.
	Note string
}

// Passed reports whether the scenario passed.
func (r Result) Passed() bool { return r.Err == nil }

// maxReason bounds a printed failure reason.
const maxReason = 240

// Line is the report line: "PASS name", "PASS name (note)" or
// "FAIL name: reason".
func (r Result) Line() string {
	if r.Err == nil {
		if r.Note != "" {
			return "PASS " + r.Name + " (" + r.Note + ")"
		}
		return "PASS " + r.Name
	}
	reason := r.Err.Error()
	if len(reason) > maxReason {
		cut := maxReason
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut] + "..."
	}
	return "FAIL " + r.Name + ": " + reason
}

// Summary counts the verdicts of a run.
type Summary struct {
	Total, Passed, Failed int
}

// Line is the report's summary line.
func (s Summary) Line(op plugin.Operation) string {
	verdict := "PASS"
	if s.Failed > 0 || s.Total == 0 {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s conformance (%s): %d scenarios, %d passed, %d failed", verdict, op, s.Total, s.Passed, s.Failed)
}

type suite struct {
	cfg         Config
	now         func() time.Time
	dir         string            // private temp directory
	initialized map[string][]byte // offer -> initialized frame with the id replaced
	seq         int
	template    *workspace // workspace_edit: the repository every scenario copies
}

// Run runs every selected scenario against the plugin in order, calling
// report with each verdict as it is reached. The error is for problems of
// the suite itself (bad configuration, no temp directory); plugin failures
// are verdicts. When ctx ends, the running scenario fails and the rest
// are not run.
func Run(ctx context.Context, cfg Config, report func(Result)) (Summary, error) {
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return Summary{}, errors.New("conformance: no plugin command")
	}
	if cfg.Operation != plugin.OpText && cfg.Operation != plugin.OpWorkspaceEdit {
		return Summary{}, errors.New("conformance: operation must be text or workspace_edit")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	cmd, err := resolveCommand(cfg.Command, cfg.Env)
	if err != nil {
		return Summary{}, err
	}
	cfg.Command = cmd
	s := &suite{cfg: cfg, now: cfg.Now, initialized: map[string][]byte{}}
	if s.now == nil {
		s.now = time.Now
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "forge-plugin-conformance-")
	if err != nil {
		return Summary{}, errors.New("conformance: cannot create a temporary directory")
	}
	defer os.RemoveAll(dir)
	if s.dir, err = filepath.Abs(dir); err != nil {
		return Summary{}, errors.New("conformance: cannot resolve the temporary directory")
	}

	if cfg.Operation == plugin.OpWorkspaceEdit {
		if s.template, err = newTemplate(filepath.Join(s.dir, "template"), s.dir, lookupEnv(cfg.Env, "PATH")); err != nil {
			return Summary{}, fmt.Errorf("conformance: cannot prepare the git workspace (is git installed?): %w", err)
		}
	}

	var sum Summary
	for _, sc := range Scenarios(cfg.Operation) {
		if cfg.Match != nil && !cfg.Match(sc.Name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		res := s.runOne(ctx, sc)
		sum.Total++
		if res.Passed() {
			sum.Passed++
		} else {
			sum.Failed++
		}
		if report != nil {
			report(res)
		}
	}
	return sum, nil
}

// resolveCommand makes the plugin path absolute (a bare name is looked up
// in the PATH the plugin will get), so the suite's own working directory
// never matters.
func resolveCommand(cmd, env []string) ([]string, error) {
	out := append([]string(nil), cmd...)
	name := cmd[0]
	if strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err != nil {
			return nil, errors.New("conformance: cannot resolve the plugin path")
		}
		if !executable(abs) {
			return nil, errors.New("conformance: the plugin is not an executable file")
		}
		out[0] = abs
		return out, nil
	}
	for _, dir := range filepath.SplitList(lookupEnv(env, "PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, name); executable(p) {
			out[0] = p
			return out, nil
		}
	}
	return nil, errors.New("conformance: plugin not found in PATH")
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// instruction is the instruction of workspace_edit requests.
const instruction = "Create a file named CONFORMANCE.md containing one line: plugin conformance check."

// runOne runs one scenario in a fresh plugin process.
func (s *suite) runOne(ctx context.Context, sc Scenario) Result {
	res := Result{Name: sc.Name, Class: sc.Class}
	s.seq++
	r, ws, err := s.request(sc)
	if err != nil {
		res.Err = fail("suite error: %v", err)
		return res
	}
	if ws != nil {
		defer os.RemoveAll(ws.dir)
	}
	if sc.Expect == ExpectHostRun {
		res.Err = s.judgeHostRun(ctx, r, ws)
		return res
	}
	p, err := startProc(s.cfg.Command, s.cfg.Env, s.cfg.Reaper, s.now)
	if err != nil {
		res.Err = err
		return res
	}
	a := newAttempt(p)
	timer := time.AfterFunc(s.cfg.Timeout, a.expire)
	stopWatch := context.AfterFunc(ctx, a.expire)
	err = s.judge(a, sc, r, ws)
	timer.Stop()
	stopWatch()
	a.finish()
	if err != nil && a.expired() {
		err = errTimeout
		if ctx.Err() != nil {
			err = errors.New("interrupted")
		}
	}
	var na errNotApplicable
	if errors.As(err, &na) {
		res.Note = na.Error()
		return res
	}
	if err == nil && ws != nil && (sc.Expect == ExpectSilentExit || sc.Expect == ExpectInitializedExit) {
		err = ws.checkUntouched()
	}
	res.Err = err
	return res
}

// request builds the values of one scenario run: a fresh session id, the
// offer, and for workspace_edit a fresh git workspace.
func (s *suite) request(sc Scenario) (*Request, *workspace, error) {
	id, err := plugin.NewID(s.cfg.Random)
	if err != nil {
		return nil, nil, errors.New("no session id")
	}
	offer := sc.Offer
	if offer == nil {
		offer = DefaultOffer(s.cfg.Operation)
	}
	ms := s.cfg.Timeout.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	if ms > plugin.MaxTimeoutMS {
		ms = plugin.MaxTimeoutMS
	}
	r := &Request{ID: id, Operation: s.cfg.Operation, Offer: offer,
		Workspace: s.dir, Instruction: instruction, TimeoutMS: ms}
	if s.cfg.Operation != plugin.OpWorkspaceEdit {
		return r, nil, nil
	}
	ws, err := s.template.clone(filepath.Join(s.dir, fmt.Sprintf("workspace-%d", s.seq)))
	if err != nil {
		return nil, nil, err
	}
	r.Workspace = ws.dir
	return r, ws, nil
}
