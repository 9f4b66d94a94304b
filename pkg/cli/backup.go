package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/0k-lab/agent-forge/pkg/install"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// Admin exit codes of backup and restore (DECISIONS 13's family).
const (
	exitAdminOK      = 0
	exitAdminUsage   = 1
	exitAdminRefused = 2
)

const defaultBackupTimeout = 30 * time.Minute

// stateFlags are the flags backup and restore share.
type stateFlags struct {
	db      string
	timeout time.Duration
}

func (c *command) stateFlagSet(sf *stateFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("forge "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&sf.db, "db", install.Database, "the Gate's database (its config's \"database\")")
	fs.DurationVar(&sf.timeout, "timeout", defaultBackupTimeout, "give up after this long, changing nothing")
	return fs
}

// adminArgs parses a backup or restore command line: the shared flags and
// exactly one positional path. Errors are reported here (usage, exit 1).
func (c *command) adminArgs(args []string) (stateFlags, string, error) {
	var sf stateFlags
	fs := c.stateFlagSet(&sf)
	positional, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		c.subUsage(fs)
		return sf, "", &ExitError{Code: ExitOK}
	}
	if err != nil {
		return sf, "", c.adminUsage("unknown flag or invalid flag value")
	}
	if len(positional) != 1 || positional[0] == "" {
		return sf, "", c.adminUsage("exactly one path is required")
	}
	if sf.timeout <= 0 {
		fmt.Fprintf(c.stderr, "forge: error: %s: -timeout must be positive\n", c.name)
		return sf, "", &ExitError{Code: exitAdminUsage}
	}
	return sf, positional[0], nil
}

// adminUsage reports a usage error the DECISIONS 13 way: exit 1, the
// error line first, then the synopsis; no argument value is echoed.
func (c *command) adminUsage(msg string) error {
	sub, _ := lookupSubcommand(c.name)
	fmt.Fprintf(c.stderr, "forge: error: %s: %s\nusage: forge %s\n", c.name, msg, sub.synopsis)
	return &ExitError{Code: exitAdminUsage}
}

// runBackup is `forge backup`: a consistent copy of the Gate's database,
// made on this host through a read-only connection while the Gate serves
// (store.Backup). Exit 0 done, 1 usage, 2 refused or failed with the
// destination unchanged.
func runBackup(ctx context.Context, c *command, args []string) error {
	sf, dst, err := c.adminArgs(args)
	if err != nil {
		return err
	}
	if err := store.CheckDSN(sf.db); err != nil {
		fmt.Fprintf(c.stderr, "forge: error: backup: -db: %s\n", err)
		return &ExitError{Code: exitAdminUsage}
	}
	ctx, cancel := context.WithTimeout(ctx, sf.timeout)
	defer cancel()
	var progress store.Progress
	terminal := stderrIsTerminal(c.stderr)
	if terminal {
		progress = func(written, total int64) {
			fmt.Fprintf(c.stderr, "\rforge backup: %s of about %s", mib(written), mib(total))
		}
	}
	info, err := store.Backup(ctx, sf.db, dst, progress)
	if terminal {
		fmt.Fprintln(c.stderr)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(c.stderr, "forge: error: backup: not finished within -timeout %s; the destination is unchanged\n", sf.timeout)
		} else {
			fmt.Fprintf(c.stderr, "forge: error: backup: %s; the destination is unchanged\n", err)
		}
		return &ExitError{Code: exitAdminRefused}
	}
	fmt.Fprintf(c.stdout, "forge backup: wrote %d bytes (integrity ok, schema version %d, fencing epoch %d)\n", info.Bytes, info.SchemaVersion, info.Epoch)
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// runRestore is `forge restore`: puts a backup (or a replica restored to a
// file) in place as the Gate's database with the state directory's owner
// and mode 0600, opening a new fencing epoch (store.Restore). Exit 0 done,
// 1 usage, 2 refused or failed with nothing changed.
func runRestore(ctx context.Context, c *command, args []string) error {
	sf, src, err := c.adminArgs(args)
	if err != nil {
		return err
	}
	if err := store.CheckDSN(sf.db); err != nil {
		fmt.Fprintf(c.stderr, "forge: error: restore: -db: %s\n", err)
		return &ExitError{Code: exitAdminUsage}
	}
	ctx, cancel := context.WithTimeout(ctx, sf.timeout)
	defer cancel()
	info, err := store.Restore(ctx, src, sf.db, time.Now())
	if err != nil {
		switch {
		case errors.Is(err, store.ErrLocked):
			fmt.Fprintln(c.stderr, "forge: error: restore: a Gate is running on this state (it holds the state directory's lock); stop it first; nothing changed")
		case errors.Is(err, context.DeadlineExceeded):
			fmt.Fprintf(c.stderr, "forge: error: restore: not finished within -timeout %s; nothing changed\n", sf.timeout)
		default:
			fmt.Fprintf(c.stderr, "forge: error: restore: %s; nothing changed\n", err)
		}
		return &ExitError{Code: exitAdminRefused}
	}
	fmt.Fprintf(c.stdout, "forge restore: restored %d bytes (schema version %d, fencing epoch %d, events numbered from %d)\n", info.Bytes, info.SchemaVersion, info.Epoch, info.EventFloor+1)
	return nil
}
