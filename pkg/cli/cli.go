package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/install"
)

// Exit codes, the command's documented contract.
const (
	ExitOK        = 0
	ExitErr       = 1
	ExitUsage     = 2
	ExitJobFailed = 3
	ExitTimedOut  = 4
)

// LookupEnv reads one environment variable; os.LookupEnv in production.
type LookupEnv func(name string) (string, bool)

// ExitError carries the process exit code out of Run. Run has already
// written every message the user should see; the caller only exits.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return "exit status " + strconv.Itoa(e.Code) }

// ExitCode maps Run's error to the process exit status.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitErr
}

// failure is an error a subcommand reports: the exit code, a value-free
// message and an optional hint.
type failure struct {
	code int
	msg  string
	hint string
	// transient marks network failures and 5xx answers, which wait retries
	// after its first successful poll.
	transient bool
}

func (f *failure) Error() string { return f.msg }

func fail(code int, hint, format string, args ...any) error {
	return &failure{code: code, msg: fmt.Sprintf(format, args...), hint: hint}
}

func usageErr(format string, args ...any) error {
	return &failure{code: ExitUsage, msg: fmt.Sprintf(format, args...)}
}

// command is the state one subcommand invocation runs with.
type command struct {
	name   string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	env    LookupEnv
}

type subcommand struct {
	name     string
	synopsis string
	run      func(ctx context.Context, c *command, args []string) error
}

// subcommands lists the job subcommands in usage order.
func subcommands() []subcommand {
	return []subcommand{
		{"submit", "submit -file PATH|- [-wait [-timeout D] [-poll D] [-progress]]", runSubmit},
		{"wait", "wait [-timeout D] [-poll D] [-progress] JOB_ID", runWait},
		{"status", "status JOB_ID", runStatus},
		{"events", "events JOB_ID", runEvents},
		{"result", "result JOB_ID", runResult},
		{"install", install.Usage, runInstall},
		{"doctor", "doctor", runDoctor},
		{"backup", "backup [-db PATH] [-timeout D] DEST", runBackup},
		{"restore", "restore [-db PATH] [-timeout D] SOURCE", runRestore},
	}
}

func lookupSubcommand(name string) (subcommand, bool) {
	for _, s := range subcommands() {
		if s.name == name {
			return s, true
		}
	}
	return subcommand{}, false
}

// Run executes one `forge` invocation; args excludes the program name.
// It returns nil on success or an *ExitError carrying the exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env LookupEnv) error {
	if len(args) == 0 {
		printUsage(stderr)
		return &ExitError{Code: ExitUsage}
	}
	switch args[0] {
	case "--version", "-version":
		if len(args) != 1 {
			return report(stderr, usageErr("--version takes no arguments"))
		}
		if _, err := fmt.Fprintln(stdout, buildinfo.Line("forge")); err != nil {
			return report(stderr, fail(ExitErr, "", "write output failed"))
		}
		return nil
	case "-h", "--help", "-help", "help":
		printUsage(stderr)
		return nil
	}
	sub, ok := lookupSubcommand(args[0])
	if !ok {
		printUsage(stderr)
		return report(stderr, usageErr("unknown subcommand"))
	}
	c := &command{name: args[0], stdin: stdin, stdout: stdout, stderr: stderr, env: env}
	return report(stderr, sub.run(ctx, c, args[1:]))
}

// report writes err to stderr in the documented form and converts it to an
// *ExitError.
func report(stderr io.Writer, err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Code == ExitOK {
			return nil
		}
		return ee
	}
	code, msg, hint := ExitErr, "unexpected failure", ""
	var f *failure
	if errors.As(err, &f) {
		code, msg, hint = f.code, f.msg, f.hint
	}
	fmt.Fprintf(stderr, "forge: error: %s\n", msg)
	if hint != "" {
		fmt.Fprintf(stderr, "forge: hint: %s\n", hint)
	}
	return &ExitError{Code: code}
}

func printUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("usage: forge <subcommand> [flags]\n\nsubcommands:\n")
	for _, s := range subcommands() {
		fmt.Fprintf(&b, "  forge %s\n", s.synopsis)
	}
	b.WriteString("  forge --version\n\n")
	b.WriteString("every job subcommand takes -url (default $FORGE_GATE_URL) and -token-env\n")
	b.WriteString("(default FORGE_OWNER_TOKEN); the owner token is read only from that variable.\n")
	b.WriteString("job exit codes: 0 ok, 1 error, 2 usage, 3 job failed, 4 wait timed out\n")
	b.WriteString("install: 0 done, 1 usage, 2 refused or restored, 3 not restored; doctor: 0 healthy, 1 usage, 2 unhealthy\n")
	b.WriteString("backup, restore: 0 done, 1 usage, 2 refused or failed (nothing changed)\n")
	io.WriteString(w, b.String())
}

// flagSet builds a subcommand's flag set with the connection flags. Flag
// errors are reported by parse without echoing argument values.
func (c *command) flagSet(conn *connFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("forge "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&conn.url, "url", "", "Gate base URL (default $FORGE_GATE_URL)")
	fs.StringVar(&conn.tokenEnv, "token-env", defaultTokenEnv, "environment variable holding the owner token")
	return fs
}

// parse parses flags, allowing them before and after positional arguments,
// and returns the positional arguments. -h prints the subcommand's usage and
// yields an *ExitError with code 0.
func (c *command) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		c.subUsage(fs)
		if errors.Is(err, flag.ErrHelp) {
			return nil, &ExitError{Code: ExitOK}
		}
		return nil, usageErr("%s: unknown flag or invalid flag value", c.name)
	}
	return positional, nil
}

// parseInterspersed parses flags before and after positional arguments
// and returns the positional ones; after a literal "--" everything is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func (c *command) subUsage(fs *flag.FlagSet) {
	var b strings.Builder
	sub, _ := lookupSubcommand(c.name)
	fmt.Fprintf(&b, "usage: forge %s\n", sub.synopsis)
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	io.WriteString(c.stderr, b.String())
}

// jobIDArg returns the single positional job id, validated.
func (c *command) jobIDArg(positional []string) (string, error) {
	if len(positional) != 1 {
		return "", usageErr("%s: expected exactly one JOB_ID argument", c.name)
	}
	if err := checkJobID(positional[0]); err != nil {
		return "", usageErr("%s: JOB_ID %v", c.name, err)
	}
	return positional[0], nil
}

// readJob runs a read-only subcommand: connection flags, one job id, then
// fetch returns what is printed as JSON.
func (c *command) readJob(ctx context.Context, args []string, fetch func(context.Context, *client, string) (any, error)) error {
	var conn connFlags
	fs := c.flagSet(&conn)
	positional, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	id, err := c.jobIDArg(positional)
	if err != nil {
		return err
	}
	cl, err := c.connect(conn)
	if err != nil {
		return err
	}
	v, err := fetch(ctx, cl, id)
	if err != nil {
		return err
	}
	return c.printJSON(v)
}

// printJSON writes v to stdout as indented JSON with a trailing newline.
func (c *command) printJSON(v any) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(ExitErr, "", "encode output failed")
	}
	if _, err := io.WriteString(c.stdout, b.String()); err != nil {
		return fail(ExitErr, "", "write output failed")
	}
	return nil
}
