package worker

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/serve"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// pluginArg switches the test binary into a scripted test plugin; the next
// argument is the mode. The Worker under test runs the test binary itself
// as its plugins (and as its subreaper wrapper).
const pluginArg = "__worker_test_plugin"

// submitterArg switches the test binary into a load generator that posts
// text jobs to a Gate one after another (arguments: address, count), so a
// benchmark can keep the submitter's CPU out of what it measures.
const submitterArg = "__worker_test_submitter"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		// syscall.Exit skips the race detector's exit delay (GORACE
		// atexit_sleep_ms), which would break the 250 ms exit window.
		case supervise.ReaperArg:
			syscall.Exit(supervise.ReaperMain(os.Args[2:]))
		case pluginArg:
			syscall.Exit(testPlugin(os.Args[2:]))
		case submitterArg:
			syscall.Exit(submitter(os.Args[2:]))
		case sandboxSessionsArg:
			syscall.Exit(sandboxSessions(os.Args[2:]))
		}
	}
	code := withProviderTLS(m.Run)
	if editPlugin.dir != "" {
		os.RemoveAll(editPlugin.dir)
	}
	os.Exit(code)
}

// testPlugin is a protocol v1 plugin with scripted behaviour:
//
//	upper           upper-cases the input
//	env             answers with its sorted environment and working directory
//	block SOCK      dials SOCK, writes "started", waits for the Worker's
//	                cancel, writes "cancelled", ends with failure{cancelled}
//	slow            upper-cases the input after 2 s (several test lease TTLs)
//	fail            failure{execution_failed}
//	garbage         writes a non-frame line and exits 1
//	hang            ignores everything until killed
//	flood           writes far more stderr than any budget
//	stubborn        ignores cancel (sleeps until killed) when the input is
//	                "hang"; otherwise upper-cases the input
func testPlugin(args []string) int {
	if len(args) == 0 {
		return 2
	}
	caps := []plugin.Capability{plugin.CapText}
	var h serve.Handler
	switch args[0] {
	case "upper":
		h = func(_ context.Context, r serve.Request) (serve.Result, error) {
			return serve.Result{Output: strings.ToUpper(r.Input)}, nil
		}
	case "env":
		h = func(_ context.Context, _ serve.Request) (serve.Result, error) {
			env := os.Environ()
			slices.Sort(env)
			wd, _ := os.Getwd()
			return serve.Result{Output: strings.Join(append(env, "cwd="+wd), "\n")}, nil
		}
	case "block":
		h = func(ctx context.Context, _ serve.Request) (serve.Result, error) {
			c, err := net.Dial("unix", args[1])
			if err != nil {
				return serve.Result{}, err
			}
			defer c.Close()
			fmt.Fprintln(c, "started")
			<-ctx.Done()
			fmt.Fprintln(c, "cancelled")
			return serve.Result{}, ctx.Err()
		}
	case "slow":
		h = func(ctx context.Context, r serve.Request) (serve.Result, error) {
			select {
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
				return serve.Result{}, ctx.Err()
			}
			return serve.Result{Output: strings.ToUpper(r.Input)}, nil
		}
	case "stubborn":
		h = func(_ context.Context, r serve.Request) (serve.Result, error) {
			if r.Input == "hang" {
				time.Sleep(time.Hour)
			}
			return serve.Result{Output: strings.ToUpper(r.Input)}, nil
		}
	case "fail":
		h = func(context.Context, serve.Request) (serve.Result, error) {
			return serve.Result{}, serve.Fail(plugin.CategoryExecutionFailed)
		}
	case "garbage":
		fmt.Println("this is not a frame")
		return 1
	case "hang":
		time.Sleep(time.Hour)
		return 1
	case "flood":
		chunk := strings.Repeat("x", 64<<10)
		for i := 0; i < 1024; i++ {
			fmt.Fprint(os.Stderr, chunk)
		}
		return 1
	default:
		return 2
	}
	if err := serve.Serve(context.Background(), os.Stdin, os.Stdout, caps, h); err != nil {
		return 1
	}
	return 0
}
