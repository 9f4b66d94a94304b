package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
)

// runSubmit submits one task and prints the job, or with -wait the terminal
// aggregate.
func runSubmit(ctx context.Context, c *command, args []string) error {
	var conn connFlags
	var wf waitFlags
	var file string
	var wait bool
	fset := c.flagSet(&conn)
	fset.StringVar(&file, "file", "", "task JSON file, or - for stdin (at most 1 MiB)")
	fset.BoolVar(&wait, "wait", false, "wait until the job is terminal and print the aggregate")
	wf.register(fset)
	positional, err := c.parse(fset, args)
	if err != nil {
		return err
	}
	if len(positional) != 0 {
		return usageErr("submit: unexpected argument; the task comes from -file")
	}
	if file == "" {
		return usageErr("submit: -file PATH or -file - is required")
	}
	if !wait && (flagSet(fset, "timeout") || flagSet(fset, "poll") || flagSet(fset, "progress")) {
		return usageErr("submit: -timeout, -poll and -progress need -wait")
	}
	if err := wf.check(c.name); err != nil {
		return err
	}
	cl, err := c.connect(conn)
	if err != nil {
		return err
	}
	data, err := c.readTask(file)
	if err != nil {
		return err
	}
	task, err := DecodeTask(data)
	if err != nil {
		return fail(ExitErr, "", "task file: %v", err)
	}
	body, err := task.encode()
	if err != nil {
		return fail(ExitErr, "", "task file: %v", err)
	}
	job, err := cl.submit(ctx, body)
	if err != nil {
		return err
	}
	if !wait {
		return c.printJSON(job)
	}
	// The job exists now; a later timeout names it so it can be resumed.
	return c.waitAndPrint(ctx, cl, job.ID, wf, false)
}

func flagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			found = true
		}
	})
	return found
}

// readTask reads at most maxTaskBytes from the file or stdin. Errors never
// contain the path.
func (c *command) readTask(file string) ([]byte, error) {
	var r io.Reader
	if file == "-" {
		r = c.stdin
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, fail(ExitErr, "", "task file: cannot open (%s)", fsReason(err))
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxTaskBytes+1))
	if err != nil {
		return nil, fail(ExitErr, "", "task file: read failed (%s)", fsReason(err))
	}
	if len(data) > maxTaskBytes {
		return nil, fail(ExitErr, "", "task file: larger than %d bytes", maxTaskBytes)
	}
	return data, nil
}

func fsReason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return "I/O error"
}
