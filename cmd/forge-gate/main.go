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
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/gate"
)

func main() {
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
	fs := flag.NewFlagSet("forge-gate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var configFlag onceString
	var versionFlag onceBool
	fs.Var(&configFlag, "config", "path to gate.json")
	fs.Var(&versionFlag, "version", "print the version and exit")
	configPath, version := &configFlag.value, &versionFlag.value
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "forge-gate: error:", errUsage)
		return errUsage
	}
	if *version {
		if *configPath != "" {
			fmt.Fprintln(stderr, "forge-gate: error:", errUsage)
			return errUsage
		}
		fmt.Fprintln(stdout, buildinfo.Line("forge-gate"))
		return nil
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "forge-gate: error:", errUsage)
		return errUsage
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	f, err := os.Open(*configPath)
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

// onceString is a string flag that may be given at most once: a repeated
// -config is a usage error, not "last one wins".
type onceString struct {
	value string
	set   bool
}

func (f *onceString) String() string { return f.value }

func (f *onceString) Set(v string) error {
	if f.set {
		return errors.New("flag given more than once")
	}
	f.value, f.set = v, true
	return nil
}

// onceBool is a boolean flag that may be given at most once.
type onceBool struct {
	value bool
	set   bool
}

func (f *onceBool) String() string { return strconv.FormatBool(f.value) }

func (f *onceBool) IsBoolFlag() bool { return true }

func (f *onceBool) Set(v string) error {
	if f.set {
		return errors.New("flag given more than once")
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	f.value, f.set = b, true
	return nil
}
