// Command forge-gate runs the Agent Forge Gate: the owner HTTP API, the
// Worker WebSocket endpoint and the authoritative SQLite store.
//
// Usage: forge-gate -config gate.json | forge-gate --version
//
// Exit codes: 0 after a graceful shutdown (SIGTERM/SIGINT, also one that
// arrives while the Gate is still starting), 1 on a startup, store or
// serving failure, 2 on a usage error (including a repeated flag).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/daemonargs"
	"github.com/0k-lab/agent-forge/pkg/gate"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

func main() {
	// Reaper mode first: the Gate runs public-source git under reapers
	// started from its own binary (supervise.ReaperPool).
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	// The environment already holds the tokens: no process of the same
	// account may read it, or this process's memory, from here on.
	if err := sandbox.ProtectSelf(); err != nil {
		fmt.Fprintln(os.Stderr, "forge-gate: error: cannot make the process non-dumpable")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// errUsage marks a command-line mistake (exit 2).
var errUsage = errors.New("usage: forge-gate -config gate.json | forge-gate --version")

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
	configPath, version, err := daemonargs.Parse(args)
	if err != nil {
		fmt.Fprintln(stderr, "forge-gate: error:", errUsage)
		return errUsage
	}
	if version {
		fmt.Fprintln(stdout, buildinfo.Line("forge-gate"))
		return nil
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	f, err := os.Open(configPath)
	if err != nil {
		log.Error("startup failed", "error", "cannot open the config file")
		return errors.New("cannot open the config file")
	}
	cfg, sec, err := gate.LoadConfig(f, os.Getenv)
	f.Close()
	if err != nil {
		log.Error("startup failed", "error", err.Error())
		return err
	}
	if err := gate.Run(ctx, cfg, sec, log, time.Now); err != nil {
		// A SIGTERM/SIGINT that arrives during startup (while the store
		// opens or the startup sweep runs) is a requested stop, not a
		// failure: it exits 0 like a stop after startup.
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			log.Info("stopped during startup")
			return nil
		}
		log.Error("gate stopped", "error", err.Error())
		return err
	}
	log.Info("stopped")
	return nil
}
