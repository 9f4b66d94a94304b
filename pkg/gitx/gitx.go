package gitx

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Defaults applied when a Runner field is zero.
const (
	DefaultTimeout     = time.Minute
	DefaultOutputBytes = 1 << 20
	DefaultKillGrace   = time.Second
)

// overrides are the -c options every invocation carries, in order.
var overrides = [...]string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"credential.helper=",
	"protocol.allow=never",
	"commit.gpgSign=false",
	"tag.gpgSign=false",
	"gc.auto=0",
	"maintenance.auto=false",
	"advice.detachedHead=false",
	"core.pager=cat",
}

// httpsOverrides open exactly one transport, https, for a command that
// sets Cmd.HTTPS, and make it refuse redirects. They follow overrides, so
// they win; every other protocol stays at protocol.allow=never.
var httpsOverrides = [...]string{
	"protocol.https.allow=always",
	"http.followRedirects=false",
}

// bundleOverrides open the file transport for a command that sets
// Cmd.Bundle: reading a bundle file is git's file transport. The caller
// names the bundle by an absolute path it created; no other location is
// ever given to such a command.
var bundleOverrides = [...]string{
	"protocol.file.allow=always",
}

// Runner runs git commands. Its zero value is not usable: Git and Home
// are required.
type Runner struct {
	// Git is the absolute path of the git executable.
	Git string
	// Home is a private directory used as HOME and XDG_CONFIG_HOME. The
	// caller creates and removes it.
	Home string
	// Timeout bounds each command (the policy's git_timeout).
	Timeout time.Duration
	// OutputBytes bounds each command's stdout and stderr together (the
	// policy's git_output_bytes); a command writing more is stopped.
	OutputBytes int64
	// KillGrace is the delay between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// Reaper, when set, runs each git under one of the pool's reapers, so
	// that git and its helpers stop even when the caller dies by SIGKILL
	// (supervise.ReaperPool; the calling binary dispatches ReaperArg).
	Reaper *supervise.ReaperPool
	// MemoryBytes, when positive, bounds each command's data (RLIMIT_DATA,
	// soft and hard: its heap and private writable mappings, not the packs
	// it maps read-only). git past it fails as when any allocation is
	// refused (OutOfMemory reports it). /bin/sh sets the limit and then
	// executes git in its place, so the limit holds from git's first
	// instruction.
	MemoryBytes int64
}

// memoryScript is what /bin/sh runs for a Runner with MemoryBytes: $1 is
// the limit in KiB, the rest git's argv. A limit it cannot set exits
// limitFailed before git starts.
const memoryScript = `ulimit -d "$1" 2>/dev/null || exit 125; shift; exec "$@"`

// limitFailed is the exit status of memoryScript when ulimit fails (git
// itself never exits 125).
const limitFailed = 125

// Find returns the absolute path of the git executable on the given PATH
// value.
func Find(pathEnv string) (string, error) {
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, "git")
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	return "", &Error{Op: "find", Reason: "git executable not found"}
}

// Error is a failed git command. It never holds argv values, paths,
// environment values or output.
type Error struct {
	Op     string // the git subcommand (a fixed word chosen by the caller)
	Reason string // fixed text: "exit status", "timeout", "output limit", …
	Code   int    // the exit code for Reason "exit status", else 0
	// Transport classifies a failed HTTPS command (Cmd.HTTPS) by what git
	// reported about the remote: one of the Transport* words, or "" (also
	// when the failure was local: a lock, the disk, permissions).
	Transport string

	// output is the start of what the failed command wrote (stdout, then
	// the privately kept stderr from errAt on). It never reaches Error();
	// callers may only ask whether it contains a fixed phrase.
	output []byte
	errAt  int
}

// OutputContains reports whether the failed command's output (the start
// of its stdout and stderr) contains phrase. It lets a caller classify a
// refusal (a remote's fixed rejection text) without ever seeing the output.
func (e *Error) OutputContains(phrase string) bool {
	return phrase != "" && bytes.Contains(e.output, []byte(phrase))
}

// OutOfMemory reports whether err is a git command that ran and died
// because an allocation was refused (git's "Out of memory" on stderr, as a
// Runner's MemoryBytes makes it when a command needs more).
func OutOfMemory(err error) bool {
	var e *Error
	if !errors.As(err, &e) || e.Reason != "exit status" {
		return false
	}
	stderr := e.output[e.errAt:]
	return bytes.Contains(stderr, []byte("Out of memory")) || bytes.Contains(stderr, []byte("out of memory"))
}

// What a failed HTTPS command met at the remote (Error.Transport).
const (
	TransportRedirect     = "redirect"             // the server answered a redirect (not followed)
	TransportCredentials  = "credentials_required" // the server asked for credentials (never supplied)
	TransportNotFound     = "not_found"            // no such repository
	TransportRefMissing   = "ref_missing"          // the requested ref does not exist there
	TransportServerError  = "server_error"         // the server failed (HTTP 5xx)
	TransportTLS          = "tls_failed"           // certificate or TLS handshake failure
	TransportUnreachable  = "unreachable"          // name resolution or connection failure
	TransportOtherFailure = "remote_failed"        // anything else the remote side reported
)

func (e *Error) Error() string {
	if e.Reason == "exit status" {
		return "git " + e.Op + ": exit status " + itoa(e.Code)
	}
	return "git " + e.Op + ": " + e.Reason
}

// ExitCode returns the exit code of a git command that ran and failed,
// and false for any other error.
func ExitCode(err error) (int, bool) {
	var e *Error
	if errors.As(err, &e) && e.Reason == "exit status" {
		return e.Code, true
	}
	return 0, false
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Cmd is one git invocation.
type Cmd struct {
	// Dir is the working directory (empty: Runner.Home).
	Dir string
	// GitDir and WorkTree, when set, are passed as --git-dir and
	// --work-tree so git never discovers a repository by itself.
	GitDir   string
	WorkTree string
	// Env adds NAME=value entries to the isolated environment.
	Env []string
	// Stdin is written to the command's standard input; StdinFrom, when
	// set, is streamed there instead (a pack too large to hold).
	Stdin     []byte
	StdinFrom io.Reader
	// Args are the subcommand and its arguments.
	Args []string
	// HTTPS opens the https transport for this command only (everything
	// else stays closed), with HTTP redirects refused. A failure then
	// carries Error.Transport. Only the Gate's public-source fetches set
	// it without CredentialHelper; prompts stay disabled.
	HTTPS bool
	// Bundle opens the file transport for this command only, so that
	// fetch can read a bundle file the caller wrote (a base or candidate
	// crossing the Gate/Worker boundary). Everything else stays closed.
	Bundle bool
	// CredentialHelper, when set, is the one credential.helper of this
	// command (after the override that clears every other). It must name
	// where the credential comes from, never hold it: argv is readable in
	// /proc.
	CredentialHelper string
}

// stdin is what c's standard input reads.
func (c Cmd) stdin() io.Reader {
	if c.StdinFrom != nil {
		return c.StdinFrom
	}
	return bytes.NewReader(c.Stdin)
}

// Env returns the isolated base environment for home.
func (r *Runner) Env() []string {
	return []string{
		"HOME=" + r.Home,
		"XDG_CONFIG_HOME=" + r.Home,
		"PATH=" + filepath.Dir(r.Git) + ":/usr/bin:/bin",
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		// No graft file either: one under /dev/null can never exist (and,
		// unlike /dev/null itself, draws no deprecation hint).
		"GIT_GRAFT_FILE=/dev/null/grafts",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EDITOR=/bin/false",
	}
}

// Argv returns the full argument list (after the program name) for c.
func (r *Runner) Argv(c Cmd) []string {
	args := make([]string, 0, 2*(len(overrides)+len(httpsOverrides)+len(bundleOverrides))+6+len(c.Args))
	args = append(args, "--no-pager")
	for _, o := range overrides {
		args = append(args, "-c", o)
	}
	if c.HTTPS {
		for _, o := range httpsOverrides {
			args = append(args, "-c", o)
		}
	}
	if c.Bundle {
		for _, o := range bundleOverrides {
			args = append(args, "-c", o)
		}
	}
	if c.CredentialHelper != "" {
		args = append(args, "-c", "credential.helper="+c.CredentialHelper)
	}
	if c.GitDir != "" {
		args = append(args, "--git-dir="+c.GitDir)
	}
	if c.WorkTree != "" {
		args = append(args, "--work-tree="+c.WorkTree)
	}
	return append(args, c.Args...)
}

// Run runs c and returns its stdout. A nonzero exit is an *Error with
// Reason "exit status"; ExitCode extracts its code.
func (r *Runner) Run(ctx context.Context, c Cmd) ([]byte, error) {
	op, cmd, err := r.command(c, 0)
	if err != nil {
		return nil, err
	}
	res, err := supervise.RunFrom(ctx, cmd, c.stdin())
	if err := r.outcome(op, c, res, err); err != nil {
		return nil, err
	}
	return res.Stdout, nil
}

// Stream runs c like Run but hands its stdout to read as it arrives
// instead of keeping it, so a command may write up to limit bytes (not
// Runner.OutputBytes) in the memory read needs. When read returns an
// error, git is stopped and that error is Stream's; otherwise whatever
// read left is discarded and the command's outcome is Stream's.
func (r *Runner) Stream(ctx context.Context, c Cmd, limit int64, read func(io.Reader) error) error {
	op, cmd, err := r.command(c, limit)
	if err != nil {
		return err
	}
	p, err := supervise.Start(ctx, cmd)
	if err != nil {
		return r.outcome(op, c, supervise.Result{}, err)
	}
	defer p.Close()
	go func() {
		io.Copy(p.Stdin(), c.stdin()) // EPIPE when git stops reading
		p.Stdin().Close()
	}()
	if rerr := read(p.Stdout()); rerr != nil {
		p.Kill()
		p.CloseStdout()
		p.Wait()
		if errors.Is(rerr, supervise.ErrOutputLimit) {
			return r.outcome(op, c, supervise.Result{}, rerr)
		}
		return rerr
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		io.Copy(io.Discard, p.Stdout())
	}()
	exit, reason := p.Wait()
	select {
	case <-drained:
	case <-time.After(cmd.KillGrace):
		p.CloseStdout() // a leftover process still holds stdout open
		<-drained
	}
	select {
	case <-p.Exceeded():
		if reason == nil {
			reason = supervise.ErrOutputLimit
		}
	default:
	}
	return r.outcome(op, c, supervise.Result{Exit: exit, Stderr: p.Stderr()}, reason)
}

// command assembles c for supervise (output limit: limit, or the
// Runner's when 0) and names its operation for errors.
func (r *Runner) command(c Cmd, limit int64) (string, supervise.Command, error) {
	op := "command"
	if len(c.Args) > 0 && safeWord(c.Args[0]) {
		op = c.Args[0]
	}
	if r.Git == "" || r.Home == "" {
		return op, supervise.Command{}, &Error{Op: op, Reason: "runner not configured"}
	}
	dir := c.Dir
	if dir == "" {
		dir = r.Home
	}
	if limit <= 0 {
		limit = r.OutputBytes
	}
	if limit <= 0 {
		limit = DefaultOutputBytes
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	grace := r.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	path, args := r.Git, r.Argv(c)
	if r.MemoryBytes > 0 {
		path, args = "/bin/sh", append([]string{"-c", memoryScript, "git", strconv.FormatInt(max(r.MemoryBytes>>10, 1), 10), r.Git}, args...)
	}
	return op, supervise.Command{
		Path:        path,
		Args:        args,
		Env:         append(r.Env(), c.Env...),
		Dir:         dir,
		OutputLimit: limit,
		StderrBytes: 1024,
		Timeout:     timeout,
		KillGrace:   grace,
		Reaper:      r.Reaper,
	}, nil
}

// outcome turns supervise's verdict on c into nil or an *Error.
func (r *Runner) outcome(op string, c Cmd, res supervise.Result, err error) error {
	switch {
	case err == nil:
	case errors.Is(err, supervise.ErrTimeout):
		return &Error{Op: op, Reason: "timeout"}
	case errors.Is(err, supervise.ErrOutputLimit):
		return &Error{Op: op, Reason: "output limit"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Op: op, Reason: "cancelled"}
	default:
		return &Error{Op: op, Reason: "start failed"}
	}
	if !res.Exit.Success() {
		if res.Exit.Signal != 0 {
			return &Error{Op: op, Reason: "killed by signal"}
		}
		if r.MemoryBytes > 0 && res.Exit.Code == limitFailed {
			return &Error{Op: op, Reason: "memory limit not set"}
		}
		stdout := res.Stdout[:min(len(res.Stdout), 4096)]
		out := append(append([]byte(nil), stdout...), res.Stderr...)
		e := &Error{Op: op, Reason: "exit status", Code: res.Exit.Code, output: out, errAt: len(stdout)}
		if c.HTTPS {
			e.Transport = classifyTransport(res.Stderr)
		}
		return e
	}
	return nil
}

// Line runs c and returns its stdout without the trailing newline.
func (r *Runner) Line(ctx context.Context, c Cmd) (string, error) {
	out, err := r.Run(ctx, c)
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(out, []byte("\n"))), nil
}

// safeWord reports whether s is a plain subcommand name (safe to put in an
// error message).
func safeWord(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyz-") == ""
}

// transportSigns map what git (LC_ALL=C) writes about a failed HTTPS
// remote to a Transport word; the first match wins. Stderr itself is
// never returned.
var transportSigns = [...]struct{ sign, transport string }{
	{"The requested URL returned error: 30", TransportRedirect},
	{"could not read Username", TransportCredentials},
	{"could not read Password", TransportCredentials},
	{"Authentication failed", TransportCredentials},
	{"The requested URL returned error: 401", TransportCredentials},
	{"The requested URL returned error: 403", TransportCredentials},
	{"The requested URL returned error: 404", TransportNotFound},
	{"not found", TransportNotFound},
	{"couldn't find remote ref", TransportRefMissing},
	{"The requested URL returned error: 5", TransportServerError},
	{"Could not resolve host", TransportUnreachable},
	{"Failed to connect", TransportUnreachable},
	{"Couldn't connect", TransportUnreachable},
	{"Connection refused", TransportUnreachable},
	{"certificate verification failed", TransportTLS},
	{"SSL certificate problem", TransportTLS},
	{"gnutls_handshake", TransportTLS},
	{"SSL_connect", TransportTLS},
	{"SSL routines", TransportTLS},
}

// localSigns are what git writes when a failure of an HTTPS command is
// its own, on this host (a lock, a full or read-only disk, permissions):
// such a failure carries no Transport word, so it is never blamed on the
// remote.
var localSigns = [...]string{
	"cannot lock ref",
	"Unable to create",
	"unable to write",
	"No space left on device",
	"Read-only file system",
	"Permission denied",
	"Disk quota exceeded",
}

func classifyTransport(stderr []byte) string {
	for _, s := range localSigns {
		if bytes.Contains(stderr, []byte(s)) {
			return ""
		}
	}
	for _, s := range transportSigns {
		if bytes.Contains(stderr, []byte(s.sign)) {
			return s.transport
		}
	}
	return TransportOtherFailure
}
