// Command forge-ref-plugin is the reference plugin for protocol v1. It
// implements the text operation by upper-casing its input (Unicode-aware)
// and reports two progress frames (started, finalizing) when progress is
// negotiated. If upper-casing grows the text beyond the 65,536-byte output
// limit it answers failure{execution_failed}.
//
// Usage:
//
//	forge-ref-plugin            speak protocol v1 on stdin/stdout
//	forge-ref-plugin --version  print the version line
//
// Exit codes: 0 after a complete session (result or failure frame), 1 when
// the session broke (invalid frame, unexpected input, I/O error), 2 for
// usage errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/serve"
)

const name = "forge-ref-plugin"

// errUsage marks command-line errors (exit 2).
var errUsage = errors.New("usage: forge-ref-plugin [--version]")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	version := fs.Bool("version", false, "print the version line")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(stderr, name+": error: "+errUsage.Error())
		return errUsage
	}
	if *version {
		_, err := fmt.Fprintln(stdout, buildinfo.Line(name))
		return err
	}
	err := serve.ServeWithProgress(ctx, stdin, stdout, []plugin.Capability{plugin.CapText}, upper)
	if err != nil {
		fmt.Fprintln(stderr, name+": error: "+err.Error())
	}
	return err
}

// upper is the text operation: Unicode-aware upper-casing.
func upper(_ context.Context, req serve.Request, progress serve.Progress) (serve.Result, error) {
	if err := progress(plugin.StageStarted, "upper-casing"); err != nil {
		return serve.Result{}, err
	}
	out := strings.ToUpper(req.Input)
	if len(out) > plugin.TextBytes {
		return serve.Result{}, serve.Fail(plugin.CategoryExecutionFailed)
	}
	if err := progress(plugin.StageFinalizing, "done"); err != nil {
		return serve.Result{}, err
	}
	return serve.Result{Output: out}, nil
}
