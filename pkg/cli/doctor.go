package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/0k-lab/agent-forge/pkg/doctor"
	"github.com/0k-lab/agent-forge/pkg/install"
)

// runDoctor is `forge doctor` (pkg/doctor): exit 0 healthy, 2 unhealthy,
// 1 usage or configuration error.
func runDoctor(ctx context.Context, c *command, args []string) error {
	if len(args) != 0 {
		fmt.Fprintln(c.stderr, "forge: error: doctor: doctor takes no arguments")
		return &ExitError{Code: doctor.ExitConfig}
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(c.stderr, "forge: error: doctor: forge doctor must run as root (it reads the mode-0600 owner token)")
		return &ExitError{Code: doctor.ExitConfig}
	}
	code := doctor.Run(ctx, install.SystemHost(), self(), c.stdout, c.stderr)
	if code == doctor.ExitHealthy {
		return nil
	}
	return &ExitError{Code: code}
}
