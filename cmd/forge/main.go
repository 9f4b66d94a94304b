// Command forge is the owner's client for the Agent Forge Gate: it submits
// jobs and prints their status, events and results as JSON. See pkg/cli for
// the subcommands, output contract and exit codes.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/0k-lab/agent-forge/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return cli.Run(ctx, args, stdin, stdout, stderr, os.LookupEnv)
}
