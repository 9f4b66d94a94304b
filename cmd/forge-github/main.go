// Command forge-github publishes one reviewed Worker candidate as a branch
// and pull request on GitHub through a GitHub App (see pkg/publish and
// docs/forge-github.md).
//
// Usage: forge-github -config github.json < publication.json | forge-github --version
//
// Exit codes: 0 published (created or reconciled; one JSON object on
// stdout), 1 configuration or local environment error, 2 usage error,
// 3 refused (the publication does not match the local repository or
// GitHub's state; nothing was changed on GitHub), 4 GitHub refused or
// failed (repeating the same publication is safe).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/daemonargs"
	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/publish"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

func main() {
	// The environment already holds the tokens: no process of the same
	// account may read it, or this process's memory, from here on.
	if err := sandbox.ProtectSelf(); err != nil {
		fmt.Fprintln(os.Stderr, "forge-github: error: cannot make the process non-dumpable")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(exitCode(err))
}

// errUsage marks a command-line mistake (exit 2).
var errUsage = errors.New("usage: forge-github -config github.json < publication.json | forge-github --version")

func exitCode(err error) int {
	var pe *publish.Error
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, &pe):
		return int(pe.Stage)
	}
	return 1
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	configPath, version, err := daemonargs.Parse(args)
	if err != nil {
		fmt.Fprintln(stderr, "forge-github: error:", errUsage)
		return errUsage
	}
	if version {
		fmt.Fprintln(stdout, buildinfo.Line("forge-github"))
		return nil
	}
	res, err := publishOnce(ctx, configPath, stdin, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "forge-github: error:", github.Redact(err.Error()))
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

func publishOnce(ctx context.Context, configPath string, stdin io.Reader, getenv func(string) string) (*publish.Result, error) {
	cfg, creds, err := publish.LoadConfig(configPath, getenv)
	if err != nil {
		return nil, err
	}
	p, err := publish.DecodePublication(stdin)
	if err != nil {
		return nil, err
	}
	return publish.New(cfg, creds, publish.Env{Now: time.Now}).Run(ctx, p)
}
