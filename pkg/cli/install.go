package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/install"
)

// self is the running binary's release identity.
func self() install.Self {
	return install.NewSelf(buildinfo.Version(), buildinfo.Commit())
}

// runInstall is `forge install` (pkg/install); its exit codes are
// DECISIONS 13's, not the job commands'.
func runInstall(ctx context.Context, c *command, args []string) error {
	req, err := install.ParseArgs(args)
	if err != nil {
		fmt.Fprintf(c.stderr, "forge: error: install: arguments: %s\nusage: forge %s\n", err, install.Usage)
		return &ExitError{Code: install.ExitUsage}
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(c.stderr, "forge: error: install: preflight: forge install must run as root")
		return &ExitError{Code: install.ExitUsage}
	}
	err = install.Run(ctx, install.SystemHost(), install.DefaultLayout(), self(), req, c.stdout)
	if err == nil {
		return nil
	}
	var ie *install.Error
	if !errors.As(err, &ie) {
		fmt.Fprintln(c.stderr, "forge: error: install: unexpected failure")
		return &ExitError{Code: install.ExitRefused}
	}
	fmt.Fprintf(c.stderr, "forge: error: install: %s: %s\n", ie.Stage, ie.Msg)
	return &ExitError{Code: ie.Code}
}
