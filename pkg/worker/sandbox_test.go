package worker

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

func TestSandboxConfig(t *testing.T) {
	parse := func(edit func(m map[string]any)) (*Config, error) {
		m := baseConfig()
		edit(m)
		return ParseConfig(mustJSON(t, m))
	}
	c, err := parse(func(map[string]any) {})
	if err != nil || c.Sandbox != SandboxLandlock || c.SandboxReadPaths != nil {
		t.Fatalf("absent sandbox = %q %v, %v; want landlock", c.Sandbox, c.SandboxReadPaths, err)
	}
	c, err = parse(func(m map[string]any) { m["sandbox"] = "none" })
	if err != nil || c.Sandbox != SandboxNone {
		t.Fatalf("none = %v, %v", c, err)
	}
	c, err = parse(func(m map[string]any) {
		m["sandbox"] = "landlock"
		m["sandbox_read_paths"] = []any{"/opt/codex", "/srv/auth"}
	})
	if err != nil || !slices.Equal(c.SandboxReadPaths, []string{"/opt/codex", "/srv/auth"}) {
		t.Fatalf("read paths = %v, %v", c, err)
	}
	for name, tc := range map[string]struct {
		edit  func(m map[string]any)
		field string
	}{
		"unknown mode":        {func(m map[string]any) { m["sandbox"] = "Landlock" }, "sandbox"},
		"relative":            {func(m map[string]any) { m["sandbox_read_paths"] = []any{"opt/codex"} }, "sandbox_read_paths[0]"},
		"unclean":             {func(m map[string]any) { m["sandbox_read_paths"] = []any{"/opt/../etc"} }, "sandbox_read_paths[0]"},
		"root":                {func(m map[string]any) { m["sandbox_read_paths"] = []any{"/"} }, "sandbox_read_paths[0]"},
		"duplicate":           {func(m map[string]any) { m["sandbox_read_paths"] = []any{"/opt", "/opt"} }, "sandbox_read_paths[1]"},
		"holds a root":        {func(m map[string]any) { m["sandbox_read_paths"] = []any{"/srv/forge"} }, "sandbox_read_paths[0]"},
		"inside a root":       {func(m map[string]any) { m["sandbox_read_paths"] = []any{"/srv/forge/runtime/x"} }, "sandbox_read_paths[0]"},
		"installation config": {func(m map[string]any) { m["sandbox_read_paths"] = []any{"/etc/agent-forge"} }, "sandbox_read_paths[0]"},
		"with none":           {func(m map[string]any) { m["sandbox"] = "none"; m["sandbox_read_paths"] = []any{"/opt"} }, "sandbox_read_paths"},
		"not a list":          {func(m map[string]any) { m["sandbox_read_paths"] = "/opt" }, ""},
	} {
		_, err := parse(tc.edit)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if tc.field != "" && !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %q does not name %s", name, err, tc.field)
		}
		if strings.Contains(err.Error(), "/opt") || strings.Contains(err.Error(), "/srv") {
			t.Errorf("%s: error %q carries a value", name, err)
		}
	}
}

// CheckHost refuses read paths that are missing or reached through a
// symbolic link.
func TestSandboxCheckHost(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	env := envWith(map[string]string{"FORGE_WORKER_TOKEN": testToken})
	c, dir := hostFixture(t)
	c.Sandbox = SandboxLandlock
	real := filepath.Join(dir, "tools")
	os.Mkdir(real, 0o755)
	os.Symlink(real, filepath.Join(dir, "link"))
	c.SandboxReadPaths = []string{real}
	if _, err := CheckHost(c, env); err != nil {
		t.Fatalf("existing read path: %v", err)
	}
	for _, p := range []string{filepath.Join(dir, "missing"), filepath.Join(dir, "link")} {
		c.SandboxReadPaths = []string{p}
		if _, err := CheckHost(c, env); err == nil || !strings.Contains(err.Error(), "sandbox_read_paths[0]") {
			t.Errorf("read path %s: err = %v", filepath.Base(p), err)
		}
	}
}

// The ABI floor (DECISIONS 21): Landlock needs ABI 6, where a domain is
// scoped (no signal or abstract socket out of it); "landlock-unscoped"
// accepts ABI 4 and 5; below 4 (TCP ungoverned) no mode runs, and
// without Landlock only "none" does. The kernel's ABI is injected.
func TestSandboxABIFloor(t *testing.T) {
	c, err := ParseConfig(mustJSON(t, func() map[string]any {
		m := baseConfig()
		m["sandbox"] = "landlock-unscoped"
		return m
	}()))
	if err != nil || c.Sandbox != SandboxUnscoped {
		t.Fatalf("landlock-unscoped = %v, %v", c, err)
	}
	for _, tc := range []struct {
		mode string
		abi  int
		ok   bool
		says string // in the refusal
	}{
		{SandboxLandlock, 7, true, ""}, {SandboxLandlock, 6, true, ""},
		{SandboxLandlock, 5, false, "landlock-unscoped"}, {SandboxLandlock, 4, false, "landlock-unscoped"},
		{SandboxLandlock, 3, false, "TCP"}, {SandboxLandlock, 1, false, "TCP"}, {SandboxLandlock, 0, false, "not available"},
		{SandboxUnscoped, 7, true, ""}, {SandboxUnscoped, 5, true, ""}, {SandboxUnscoped, 4, true, ""},
		{SandboxUnscoped, 3, false, "TCP"}, {SandboxUnscoped, 1, false, "TCP"}, {SandboxUnscoped, 0, false, "not available"},
		{SandboxNone, 0, true, ""}, {SandboxNone, 2, true, ""},
	} {
		c := &Config{Sandbox: tc.mode}
		abi, err := checkSandboxABI(c, tc.abi)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s at ABI %d: %v", tc.mode, tc.abi, err)
		case tc.ok && tc.mode != SandboxNone && abi != tc.abi:
			t.Errorf("%s at ABI %d: uses ABI %d", tc.mode, tc.abi, abi)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "sandbox") || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s at ABI %d: err = %v, want a refusal naming sandbox and %q", tc.mode, tc.abi, err, tc.says)
		}
	}
}

// The /etc the sandbox reads leaves out the installation's directory and
// any entry holding the Worker's config or roots.
func TestSandboxEtcEntries(t *testing.T) {
	c := &Config{WorktreeRoot: "/etc/forge-wt/x", RuntimeRoot: "/srv/rt", ConfigPath: "/etc/hostname"}
	got := etcEntries(c)
	for _, p := range []string{"/etc/agent-forge", "/etc/forge-wt", "/etc/hostname"} {
		if slices.Contains(got, p) {
			t.Errorf("%s is granted", p)
		}
	}
	if _, err := os.Stat("/etc/passwd"); err == nil && !slices.Contains(got, "/etc/passwd") {
		t.Error("/etc/passwd is not granted")
	}
}

// The read layer leaves out symbolic links that another of its paths
// covers (their rule would land there anyway) and those leading to the
// Worker's own paths (their rule would grant them), and keeps the rest.
func TestSandboxReadLayerDirect(t *testing.T) {
	d := t.TempDir()
	usr, priv, other := filepath.Join(d, "usr"), filepath.Join(d, "private"), filepath.Join(t.TempDir(), "other")
	for _, p := range []string{filepath.Join(usr, "bin"), priv, other} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{"bin": filepath.Join(usr, "bin"), "secret": priv, "out": other}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	c := &Config{WorktreeRoot: priv, RuntimeRoot: filepath.Join(d, "rt")}
	paths := []string{usr, filepath.Join(d, "bin"), filepath.Join(d, "secret"), filepath.Join(d, "out")}
	got := direct(paths, c)
	if want := []string{usr, filepath.Join(d, "out")}; !slices.Equal(got, want) {
		t.Errorf("direct = %q, want %q", got, want)
	}
	if len(paths) != 4 {
		t.Error("direct changed its argument")
	}
}

// sandboxedFixture is a coding fixture whose plugin and checks run in the
// sandbox, under reapers of this test binary.
func sandboxedFixture(t *testing.T, plugin string) *codingFixture {
	t.Helper()
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	f := newCodingFixture(t, plugin)
	f.cfg.Sandbox = SandboxLandlock
	f.reaper = supervise.NewReaperPool(testBinary(t))
	t.Cleanup(f.reaper.Close)
	return f
}

// Inside the sandbox the plugin edits its worktree and the checks run
// against it (git included), but neither reaches anything else: the
// repository's shared git state, the rest of the Worker's roots, the
// fixture's other files.
func TestSandboxedCodingAttempt(t *testing.T) {
	plugin := buildEditPlugin(t)

	t.Run("edit and checks", func(t *testing.T) {
		f := sandboxedFixture(t, plugin)
		r := f.run(f.lease(wire.CodingTask{
			Instruction: "write hello.txt hi",
			Tests: [][]string{{"sh", "-c", "test -f hello.txt && echo x > \"$TMPDIR/t\" && echo y > \"$HOME/h\""},
				{"git", "status", "--porcelain"}, {"grep", "-q", "hi", "hello.txt"}},
		}, nil))
		if !r.Succeeded || r.CandidateSHA == "" {
			t.Fatalf("report %+v", r)
		}
		f.assertClean()
	})
	t.Run("refused connections are evidence", func(t *testing.T) {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var accepted atomic.Int64
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		f := sandboxedFixture(t, plugin)
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a",
			Tests: [][]string{{"sh", "-c", fmt.Sprintf("git ls-remote http://127.0.0.1:%d/x.git; exit 0", port)}}}, nil))
		if !r.Succeeded {
			t.Fatalf("report %+v", r)
		}
		recs := f.records(evidence.Options{})
		last := recs[0][len(recs[0])-1]
		if last.Phase != evidence.PhaseNetwork || last.RefusedCount == nil || *last.RefusedCount < 1 ||
			len(last.Refused) != 1 || last.Refused[0].Host != "127.0.0.1" || last.Refused[0].Port != port {
			t.Fatalf("last record %+v", last)
		}
		if n := accepted.Load(); n != 0 {
			t.Errorf("the check's connection reached the listener (%d)", n)
		}
	})
	t.Run("plugin cannot write shared git state", func(t *testing.T) {
		f := sandboxedFixture(t, plugin)
		r := f.run(f.lease(wire.CodingTask{Instruction: "gitfile hooks/pre-commit exit 0"}, nil))
		f.expectFailure(r, CodePluginFailed, evidence.PhasePlugin, evidence.ReasonPluginFailed)
		if _, err := os.Lstat(filepath.Join(f.repo, ".git", "hooks", "pre-commit")); err == nil {
			t.Fatal("the hook was written")
		}
	})
	for name, script := range map[string]string{
		"check cannot write the repository":  "echo x > " + "$R/repos/demo/FILE",
		"check cannot list the repositories": "ls $R/repos",
		"check cannot write the runtime":     "echo x > $R/runtime/x",
		"check cannot list the worktrees":    "ls $R/worktrees",
	} {
		t.Run(name, func(t *testing.T) {
			f := sandboxedFixture(t, plugin)
			script := strings.ReplaceAll(script, "$R", f.root)
			r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a", Tests: [][]string{{"sh", "-c", script}}}, nil))
			f.expectFailure(r, CodeScopedTestFailed, evidence.PhaseScopedCheck, evidence.ReasonFailed)
			// The same check unconfined passes: it can fail.
			f.cfg.Sandbox = SandboxNone
			if r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a", Tests: [][]string{{"sh", "-c", script}}}, nil)); !r.Succeeded {
				t.Fatalf("unsandboxed: %+v", r)
			}
		})
	}
}

// A check's program named relative to the workspace is opened beneath
// it: a link the agent made there (ignored, so validation never sees it)
// that leads out is refused (path_escape, workspace_violation) and
// nothing runs, while a link that stays inside works. With the program
// opened by its name, following links, the outside script ran, and the
// domain could read it.
func TestCheckProgramLinkedOut(t *testing.T) {
	plugin := buildEditPlugin(t)
	for _, tc := range []struct {
		name, target string
		escape       bool
	}{
		{"absolute link out", "$ROOT/outside/tool", true},
		{"relative link above the workspace", "../../../outside/tool", true},
		{"directory linked out", "", true},
		{"link inside", "bin/ok.sh", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := sandboxedFixture(t, plugin)
			outside := filepath.Join(f.root, "outside")
			if err := os.Mkdir(outside, 0o700); err != nil {
				t.Fatal(err)
			}
			// The outside program passes only where it can read itself.
			tool := "#!/bin/sh\ngrep -q OUTSIDE-SECRET \"$0\" || exit 9\n# OUTSIDE-SECRET\n"
			if err := os.WriteFile(filepath.Join(outside, "tool"), []byte(tool), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(f.repo, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(f.repo, "bin", "ok.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			gitT(t, f.repo, "add", "-A")
			gitT(t, f.repo, "commit", "-q", "-m", "tools")
			f.base = gitT(t, f.repo, "rev-parse", "HEAD")
			instr := "write .gitignore check\nwrite a.txt a\nsymlink check " + strings.ReplaceAll(tc.target, "$ROOT", f.root)
			check := []string{"./check"}
			if tc.target == "" { // a directory of the check's path, linked out
				instr = "write .gitignore tools\nwrite a.txt a\nsymlink tools " + outside
				check = []string{"tools/tool"}
			}
			r := f.run(f.lease(wire.CodingTask{Instruction: instr, Tests: [][]string{check}}, nil))
			if !tc.escape {
				if !r.Succeeded {
					t.Fatalf("report %+v", r)
				}
				return
			}
			f.expectFailure(r, wire.FailureWorkspaceViolation, evidence.PhaseScopedCheck, evidence.ReasonPathEscape)
		})
	}
}

// The policy a Worker builds reads /etc but not what the shared read
// layer leaves out of it (here the Worker's config file), and reaches
// through /etc's symbolic links.
func TestSandboxPolicyEtc(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	if _, err := os.Stat("/etc/hostname"); err != nil {
		t.Skip("no /etc/hostname")
	}
	dir := t.TempDir()
	sb := newSandboxRules(&Config{Sandbox: SandboxLandlock, WorktreeRoot: filepath.Join(dir, "wt"), RuntimeRoot: filepath.Join(dir, "rt"), ConfigPath: "/etc/hostname"})
	script := `for f in /etc/passwd /etc/hostname /etc/resolv.conf; do if [ -e "$f" ]; then if cat "$f" >/dev/null 2>&1; then echo "$f=yes"; else echo "$f=no"; fi; fi; done`
	pl := supervise.NewReaperPool(testBinary(t))
	t.Cleanup(pl.Close)
	// Twice through the same reaper: the second start finds the shared
	// rules prepared.
	for range 2 {
		out := sandboxedShell(t, pl, sb, dir, script)
		if !strings.Contains(out, "/etc/passwd=yes") || !strings.Contains(out, "/etc/hostname=no") || strings.Contains(out, "/etc/resolv.conf=no") {
			t.Fatalf("inside the sandbox:\n%s", out)
		}
	}
}

// sandboxedShell runs script with sh in a policy of sb (dir read and
// written) under pl and returns its output.
func sandboxedShell(t *testing.T, pl *supervise.ReaperPool, sb *sandboxRules, dir, script string) string {
	t.Helper()
	sh := "/bin/sh"
	res, err := supervise.Run(context.Background(), supervise.Command{Path: sh, Args: []string{"-c", script}, Env: []string{}, Dir: dir,
		Reaper: pl, Sandbox: sb.policy(sandboxDirs{rw: []string{dir}}), OutputLimit: 1 << 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Stdout)
}

// The reapers keep the shared rules prepared, their paths open; a path
// replaced since (here a read path renamed away and another directory
// renamed into its place) is followed: the next policy reads the new one,
// through the same reaper.
func TestSandboxFollowsReplacedPaths(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	for _, d := range []string{tools, tools + ".new"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "v"), []byte(filepath.Base(d)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o700)
	sb := newSandboxRules(&Config{Sandbox: SandboxLandlock, WorktreeRoot: filepath.Join(dir, "wt"), RuntimeRoot: filepath.Join(dir, "rt"),
		SandboxReadPaths: []string{tools}, ConfigPath: "/etc/hostname"})
	pl := supervise.NewReaperPool(testBinary(t))
	t.Cleanup(pl.Close)
	script := "cat " + filepath.Join(tools, "v") + " || echo denied"
	if out := sandboxedShell(t, pl, sb, work, script); out != "tools\n" {
		t.Fatalf("before: %q", out)
	}
	if err := os.Rename(tools, tools+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tools+".new", tools); err != nil {
		t.Fatal(err)
	}
	if out := sandboxedShell(t, pl, sb, work, script); out != "tools.new\n" {
		t.Fatalf("after the replacement: %q", out)
	}
	// What was renamed away is no longer granted.
	if out := sandboxedShell(t, pl, sb, work, "cat "+filepath.Join(tools+".old", "v")+" || echo denied"); out != "denied\n" {
		t.Fatalf("the old directory: %q", out)
	}
}

// rulesFixture is a directory a/box holding the read path a/box/conf,
// and a/box.new and a.new/box, directories with a conf ready to replace
// a/box and a.
func rulesFixture(t *testing.T, notify bool) (sb *sandboxRules, dir string) {
	t.Helper()
	dir = t.TempDir()
	for _, d := range []string{"a/box", "a/box.new", "a.new/box"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "conf"), []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sb = newSandboxRulesWith(&Config{Sandbox: SandboxLandlock, WorktreeRoot: filepath.Join(dir, "wt"), RuntimeRoot: filepath.Join(dir, "rt"),
		SandboxReadPaths: []string{filepath.Join(dir, "a", "box", "conf")}}, notify)
	if armed := sb.notify != nil && sb.notify.armed(); armed != (notify && runtime.GOOS == "linux") {
		t.Fatalf("inotify armed = %t", armed)
	}
	return sb, dir
}

// sameShared fails unless sb.current() is want, twice (not made again).
func sameShared(t *testing.T, sb *sandboxRules, want *sandbox.Shared, what string) {
	t.Helper()
	for range 2 {
		if sb.current() != want {
			t.Fatalf("%s: the shared rules were made again", what)
		}
	}
}

// madeAgain fails unless sb.current() is a new Shared with a new Key, and
// returns it.
func madeAgain(t *testing.T, sb *sandboxRules, old *sandbox.Shared, what string) *sandbox.Shared {
	t.Helper()
	s := sb.current()
	if s == old || s.Key() == old.Key() {
		t.Fatalf("%s: the shared rules were not made again", what)
	}
	sameShared(t, sb, s, what+", then nothing")
	return s
}

// The shared rules are made again when a directory holding a shared path
// changes, and only then: nothing changed, or a change beside the way to
// the path, keeps the same Shared. Watched with inotify, and stated when
// inotify is not to be had.
func TestSandboxRulesNoticeChanges(t *testing.T) {
	for _, notify := range []bool{true, false} {
		t.Run(fmt.Sprintf("inotify=%t", notify), func(t *testing.T) {
			sb, dir := rulesFixture(t, notify)
			s := sb.current()
			sameShared(t, sb, s, "nothing changed")
			for _, d := range []string{"beside", "a/beside"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			sameShared(t, sb, s, "entries beside the way to box")
			box := filepath.Join(dir, "a", "box")
			if notify && runtime.GOOS == "linux" {
				// The file replaced by rename: what the stat of box shows
				// only once the clock has ticked.
				conf := filepath.Join(box, "conf")
				if err := os.WriteFile(conf+".tmp", []byte("2"), 0o644); err != nil {
					t.Fatal(err)
				}
				s = madeAgain(t, sb, s, "conf.tmp created")
				if err := os.Rename(conf+".tmp", conf); err != nil {
					t.Fatal(err)
				}
				s = madeAgain(t, sb, s, "conf replaced")
			}
			// The directory holding it replaced, then the one above.
			for _, d := range []string{box, filepath.Join(dir, "a")} {
				if err := os.Rename(d, d+".old"); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(d+".new", d); err != nil {
					t.Fatal(err)
				}
				s = madeAgain(t, sb, s, filepath.Base(d)+" replaced")
			}
		})
	}
}

// BenchmarkSandboxRulesCurrent is what asking for the shared rules costs
// every policy when nothing changed: nanoseconds per current(), watched
// with inotify (notify-ns) and stated (stat-ns, the fallback and what
// every policy paid before), alternating; medians over the rounds
// (-benchtime Nx). made-again counts the rounds in which something on the
// machine did change a watched directory.
func BenchmarkSandboxRulesCurrent(b *testing.B) {
	const calls = 20000
	dir := b.TempDir()
	cfg := &Config{Sandbox: SandboxLandlock, WorktreeRoot: filepath.Join(dir, "wt"), RuntimeRoot: filepath.Join(dir, "rt"), ConfigPath: "/etc/hostname"}
	both := []*sandboxRules{newSandboxRulesWith(cfg, true), newSandboxRulesWith(cfg, false)}
	if runtime.GOOS == "linux" && !both[0].notify.armed() {
		b.Fatal("inotify is not armed")
	}
	units := []string{"notify-ns", "stat-ns"}
	rounds := newRounds()
	for i := 0; i < b.N; i++ {
		report := rounds.next()
		again := 0
		for k := range 2 {
			j := (i + k) % 2
			s := both[j].current()
			start := time.Now()
			for range calls {
				if both[j].current() != s {
					again = 1
				}
			}
			report(float64(time.Since(start).Nanoseconds())/calls, units[j])
		}
		report(float64(again), "made-again")
		report(float64(len(both[0].watch)), "watched-dirs")
	}
	rounds.reportMedians(b)
}

// A check's program named by a symbolic link that a leftover of the
// attempt keeps swapping between a real program and "/" while the check
// starts: the domain's rule is made on the file the reaper opens and
// executes, never on what the name leads to at another moment, so no
// round reads a file outside the policy (with the rule by name, a round
// that opened "/" and then executed the shell read everything). Each
// round is a start; one that opened "/" fails to start (a directory is
// no program). 100 rounds: a 5 % win rate would show with 99.4 %
// probability.
func TestSandboxProgramSwappedMidStart(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	dir := t.TempDir()
	ws, outside := filepath.Join(dir, "ws"), t.TempDir()
	secret := filepath.Join(outside, "secret")
	for _, d := range []string{ws, filepath.Join(dir, "wt"), filepath.Join(dir, "rt")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(secret, []byte("SECRET-OUTSIDE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := newSandboxRulesWith(&Config{Sandbox: SandboxLandlock, WorktreeRoot: filepath.Join(dir, "wt"), RuntimeRoot: filepath.Join(dir, "rt")}, false)
	pl := supervise.NewReaperPool(testBinary(t))
	t.Cleanup(pl.Close)
	prog := filepath.Join(ws, "check")
	if err := os.Symlink("/bin/sh", prog); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	swapped := make(chan int)
	go func() { // the leftover: renames a fresh link over the name, as fast as it can
		n := 0
		defer func() { swapped <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			target := "/bin/sh"
			if i%2 == 1 {
				target = "/"
			}
			tmp := filepath.Join(ws, ".swap")
			os.Remove(tmp)
			if os.Symlink(target, tmp) == nil && os.Rename(tmp, prog) == nil {
				n++
			}
		}
	}()
	const rounds = 100
	ran, reached := 0, 0
	for range rounds {
		res, err := supervise.Run(context.Background(), supervise.Command{Path: prog, Args: []string{"-c", "cat " + secret}, Env: []string{}, Dir: ws,
			Reaper: pl, Sandbox: sb.policy(sandboxDirs{rw: []string{ws}}), OutputLimit: 1 << 16}, nil)
		if err != nil {
			continue // it opened "/": no program to start
		}
		ran++
		if strings.Contains(string(res.Stdout), "SECRET-OUTSIDE") {
			reached++
		}
	}
	close(stop)
	t.Logf("rounds=%d started=%d reached=%d swaps=%d", rounds, ran, reached, <-swapped)
	if reached != 0 {
		t.Fatalf("%d of %d rounds read a file outside the policy", reached, rounds)
	}
	if ran == 0 || ran == rounds {
		t.Fatalf("started %d of %d rounds: the name was not swapped during the starts", ran, rounds)
	}
}
