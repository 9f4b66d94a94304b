// Command forge-host-demo runs one text operation through the real host
// runner (pkg/plugin/host), under the Linux child-subreaper wrapper, and
// prints every frame exchanged:
//
//	go run ./testdata/host-demo -plugin bin/forge-ref-plugin
//
// It is also the small wrapper binary the host tests and benchmarks use:
// its first argument may select reaper mode.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "forge-host-demo: error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("forge-host-demo", flag.ContinueOnError)
	pluginPath := fs.String("plugin", "", "plugin executable")
	input := fs.String("input", "hello from agent forge", "text to send")
	wrap := fs.Bool("reaper", true, "run the plugin under the child-subreaper wrapper (Linux)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pluginPath == "" || fs.NArg() != 0 {
		return fmt.Errorf("usage: forge-host-demo -plugin PATH [-input TEXT] [-reaper=false]")
	}
	cmd := host.Command{
		Path:        *pluginPath,
		Env:         []string{},
		OutputBytes: 1 << 20,
		Timeout:     30 * time.Second,
		Trace: func(d host.Direction, frame []byte) {
			fmt.Fprintf(stdout, "%-15s %s\n", d, frame)
		},
	}
	if *wrap {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		reapers := supervise.NewReaperPool(self)
		defer reapers.Close()
		cmd.Reaper = reapers
	}
	req := host.Request{
		Offer:     []plugin.Capability{plugin.CapText, plugin.CapProgress, plugin.CapCancel},
		Operation: plugin.OpText,
		Input:     *input,
	}
	out, err := host.Run(ctx, cmd, req, func(p host.Progress) {
		fmt.Fprintf(stdout, "%-15s #%d %s %q\n", "progress", p.Sequence, p.Stage, p.Text)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%-15s %q -> %q (selected %v, stdin closed, stdout EOF, exit 0)\n", "result", *input, out.Output, out.Selected)
	return nil
}
