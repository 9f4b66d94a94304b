// Command forge-worker runs an Agent Forge Worker: one outbound WebSocket
// lane per concurrency slot to Gate, one fresh plugin process per leased
// attempt. Text jobs always run; coding jobs run when the config registers
// repositories (git must then be on PATH).
//
// Usage: forge-worker -config worker.json | forge-worker --version
//
// The worker token is read from the environment variable the config names
// (token_env), and each provider's key from its key_env: the Worker serves
// them through its model gateway on one loopback port (logged as
// "gateway" with its port) and hands each attempt only a credential that
// dies with its lease (docs/config.md, docs/sandbox.md). Logs are JSON lines on stderr; they never carry tokens,
// task text, plugin output, argv or paths.
//
// Exit codes: 0 after a graceful shutdown (SIGTERM/SIGINT: stop taking
// leases, cancel running attempts, report them, close), 1 on a startup
// failure (bad config, missing token, missing plugin executable), 2 on a
// usage error.
//
// Every plugin invocation and scoped check runs in a Landlock sandbox
// (docs/sandbox.md) unless the config says "sandbox": "none"; without
// Landlock, or without the seccomp user notification its metadata guard
// needs, the Worker refuses to start (exit 1) rather than run them
// unconfined. The log says which sandbox, and which Landlock ABI, is in
// use. The Worker is non-dumpable from its first instruction on.
//
// The binary also serves the plugin child-subreaper wrapper: when its first
// argument is supervise.ReaperArg it runs supervise.ReaperMain instead (the
// Worker keeps one such reaper per lane busy running plugins, on Linux).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/daemonargs"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
	"github.com/0k-lab/agent-forge/pkg/worker"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	// The environment already holds the tokens: no process of the same
	// account may read it, or this process's memory, from here on.
	if err := sandbox.ProtectSelf(); err != nil {
		fmt.Fprintln(os.Stderr, "forge-worker: error: cannot make the process non-dumpable")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// errUsage marks a command-line mistake (exit 2).
var errUsage = errors.New("usage: forge-worker -config worker.json | forge-worker --version")

func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}

func run(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	configPath, version, err := daemonargs.Parse(args)
	if err != nil {
		fmt.Fprintln(stderr, "forge-worker: error:", errUsage)
		return errUsage
	}
	if version {
		fmt.Fprintln(stdout, buildinfo.Line("forge-worker"))
		return nil
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	cfg, token, err := load(configPath)
	if err != nil {
		log.Error("startup failed", "error", err.Error())
		return err
	}
	// The model gateway: the provider keys are read now, into this
	// non-dumpable process, and never handed on.
	gw, err := worker.OpenGateway(cfg, os.Getenv)
	if err != nil {
		log.Error("startup failed", "error", err.Error())
		return err
	}
	if gw != nil {
		defer gw.Close()
		log.Info("gateway", "listen", gw.URL(), "port", gw.Port(), "providers", len(cfg.Providers))
	}
	secrets, err := worker.Secrets(cfg, token, gw)
	if err != nil {
		log.Error("startup failed", "error", err.Error())
		return err
	}
	var cgroups *supervise.Cgroups
	if abi := worker.SandboxABI(cfg); abi == 0 {
		log.Warn("sandbox disabled: plugins and scoped checks run unconfined", "sandbox", worker.SandboxNone)
	} else {
		// The metadata guard (docs/sandbox.md) needs seccomp user
		// notification: without it every sandboxed start would fail.
		if err := sandbox.ProbeGuard(); err != nil {
			log.Error("startup failed", "error", "the sandbox's metadata guard cannot be installed: "+err.Error())
			return fmt.Errorf("the sandbox's metadata guard cannot be installed: %w", err)
		}
		// Every sandboxed program runs in a cgroup of its own, emptied
		// by the kernel when it ends (docs/sandbox.md, "Containment").
		if cgroups, err = supervise.DelegatedCgroups(); err != nil {
			msg := "the sandbox needs a cgroup v2 of the Worker's own, delegated to its account (" + err.Error() +
				"): run it under a system service manager with Delegate=yes (the installed unit does), or by hand " +
				"in a cgroup an administrator made for it and chowned to its account (docs/sandbox.md); " +
				"or set \"sandbox\": \"none\""
			log.Error("startup failed", "error", msg)
			return errors.New(msg)
		}
		defer cgroups.Close()
		log.Info("sandbox", "sandbox", cfg.Sandbox, "landlock_abi", abi, "scoped", sandbox.Scoped(abi), "metadata_guard", true,
			"containment", "cgroup", "cgroup_controllers", strings.Join(cgroups.Controllers(), " "))
		if !sandbox.Scoped(abi) {
			log.Warn("sandbox weakened: sandboxed programs can signal processes of the Worker's account", "sandbox", cfg.Sandbox)
		}
	}
	self, err := supervise.Self()
	if err != nil {
		log.Error("startup failed", "error", "cannot locate the worker executable")
		return errors.New("cannot locate the worker executable")
	}
	// Leftovers of invocations a crash interrupted (cleanup deferred).
	if err := worker.SweepRuntime(cfg.RuntimeRoot); err != nil {
		log.Warn("startup sweep incomplete", "error", err.Error())
	}
	reaper := supervise.NewReaperPool(self)
	defer reaper.Close()
	if cgroups != nil {
		reaper.Contain(cgroups)
	}
	text := worker.NewTextExecutor(cfg, os.LookupEnv, reaper)
	defer text.Close()
	executors := map[wire.Kind]worker.Executor{
		wire.KindText: text,
	}
	// The coding pipeline needs git only when repositories are
	// registered; without them coding jobs are never routed here.
	if len(cfg.Repositories) > 0 {
		coding, err := worker.NewCodingExecutor(cfg, worker.CodingOptions{LookupEnv: os.LookupEnv, Reaper: reaper, Logger: log, Secrets: secrets})
		if err != nil {
			log.Error("startup failed", "error", "git executable not found on PATH")
			return errors.New("git executable not found on PATH")
		}
		// Leftovers of attempts a crash interrupted (cleanup deferred).
		if err := coding.SweepLeftovers(ctx); err != nil {
			log.Warn("startup sweep incomplete", "error", err.Error())
		}
		executors[wire.KindCoding] = coding
	}
	w := worker.New(worker.Options{
		Config:    cfg,
		Token:     token,
		Logger:    log,
		Executors: executors,
		Gateway:   gw,
	})
	log.Info("started", "worker", cfg.ID, "lanes", cfg.Concurrency)
	if err := w.Run(ctx); err != nil {
		log.Error("worker stopped", "error", err.Error())
		return err
	}
	log.Info("stopped")
	return nil
}

// load reads, parses and host-checks the config; errors are value-free.
func load(path string) (*worker.Config, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", errors.New("cannot open the config file")
	}
	defer f.Close()
	cfg, err := worker.LoadConfig(f)
	if err != nil {
		return nil, "", err
	}
	if abs, err := filepath.Abs(path); err == nil {
		cfg.ConfigPath = abs // kept out of the sandbox
	}
	token, err := worker.CheckHost(cfg, os.Getenv)
	if err != nil {
		return nil, "", err
	}
	return cfg, token, nil
}
