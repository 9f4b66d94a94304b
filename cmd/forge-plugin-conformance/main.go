// Command forge-plugin-conformance checks a plugin executable against
// plugin protocol v1: one valid session judged frame by frame plus
// fresh-process malformed-request scenarios.
//
// Usage:
//
//	forge-plugin-conformance [-operation text|workspace_edit] [-timeout D] [-run REGEXP] [-env NAME]... PLUGIN [ARGS...]
//	forge-plugin-conformance [-operation text|workspace_edit] -list
//
// It prints "PASS name" or "FAIL name: reason" per scenario and a summary
// line. Exit codes: 0 every scenario passed, 1 a scenario failed or the
// suite could not run, 2 usage error.
//
// The plugin gets a minimal environment: PATH (the caller's, or a default
// system PATH), plus the agent plugins' executable variables (CODEX_BIN,
// CLAUDE_BIN) when the caller has them set, plus every variable named by
// a -env flag (for example the model gateway's FORGE_GATEWAY_URL,
// FORGE_GATEWAY_TOKEN and FORGE_GATEWAY_PROVIDERS an agent plugin needs)
// that the caller has set.
// One valid session runs through pkg/plugin/host, the Worker's runner. On
// Linux every scenario runs the plugin under the Worker's child-subreaper
// wrapper, which is this same binary started with supervise.ReaperArg as
// its first argument, so no descendant (setsid ones included) outlives its
// scenario.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/conformance"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

func main() {
	// Reaper mode: this binary is also the Linux child-subreaper wrapper
	// every scenario starts around the plugin.
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// usageError is a bad command line (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// errFailed means at least one scenario failed (exit 1).
var errFailed = errors.New("conformance failures")

func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// defaultPath is the plugin's PATH when the caller has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

func run(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("forge-plugin-conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	op := fs.String("operation", string(plugin.OpText), "operation of the valid session: text or workspace_edit")
	timeout := fs.Duration("timeout", conformance.DefaultTimeout, "bound of each scenario")
	pattern := fs.String("run", "", "run only scenarios whose name matches this regular expression")
	version := fs.Bool("version", false, "print the version and exit")
	var pass envNames
	fs.Var(&pass, "env", "pass this variable of the caller's environment to the plugin (repeatable)")
	list := fs.Bool("list", false, "list the scenarios of the operation (name, class, expectation) and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: forge-plugin-conformance [-operation text|workspace_edit] [-timeout D] [-run REGEXP] [-env NAME]... PLUGIN [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{"invalid flags"}
	}
	if *version {
		fmt.Fprintln(stdout, buildinfo.Line("forge-plugin-conformance"))
		return nil
	}
	bad := func(msg string) error {
		fmt.Fprintln(stderr, "forge-plugin-conformance: error: "+msg)
		fs.Usage()
		return usageError{msg}
	}
	operation := plugin.Operation(*op)
	if !operation.Valid() {
		return bad("-operation must be text or workspace_edit")
	}
	if *list {
		for _, sc := range conformance.Scenarios(operation) {
			fmt.Fprintf(stdout, "%s\t%s\t%s\n", sc.Name, sc.Class, sc.Expect)
		}
		return nil
	}
	if *timeout <= 0 || *timeout > 24*time.Hour {
		return bad("-timeout must be positive and at most 24h")
	}
	if fs.NArg() == 0 {
		return bad("missing PLUGIN")
	}
	cfg := conformance.Config{
		Command:   fs.Args(),
		Operation: operation,
		Timeout:   *timeout,
		Env:       pluginEnv(pass),
	}
	if self, err := supervise.Self(); err == nil {
		reapers := supervise.NewReaperPool(self)
		defer reapers.Close()
		cfg.Reaper = reapers
	}
	if *pattern != "" {
		re, err := regexp.Compile(*pattern)
		if err != nil {
			return bad("-run is not a valid regular expression")
		}
		cfg.Match = re.MatchString
	}
	sum, err := conformance.Run(ctx, cfg, func(r conformance.Result) {
		fmt.Fprintln(stdout, r.Line())
	})
	if err != nil {
		fmt.Fprintln(stderr, "forge-plugin-conformance: error: "+err.Error())
		return err
	}
	fmt.Fprintln(stdout, sum.Line(operation))
	if sum.Failed > 0 || sum.Total == 0 {
		return errFailed
	}
	return nil
}

// pluginEnv is the plugin's whole environment: PATH, the agent
// plugins' executable variables, and the variables named in extra, each
// only when set.
func pluginEnv(extra []string) []string {
	path, ok := os.LookupEnv("PATH")
	if !ok || path == "" {
		path = defaultPath
	}
	env := []string{"PATH=" + path}
	for _, k := range append([]string{"CODEX_BIN", "CLAUDE_BIN"}, extra...) {
		if v, ok := os.LookupEnv(k); ok && k != "PATH" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// envNames collects -env flags: portable variable names only.
type envNames []string

func (e *envNames) String() string { return strings.Join(*e, ",") }

func (e *envNames) Set(name string) error {
	if !ident.ValidEnvName(name) {
		return errors.New("not a portable environment variable name")
	}
	*e = append(*e, name)
	return nil
}
