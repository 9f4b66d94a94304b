package cli

import (
	"context"
	"errors"
	"flag"
	"time"
)

const (
	defaultWaitTimeout = 10 * time.Minute
	defaultPoll        = time.Second
	minPoll            = 10 * time.Millisecond
	maxPoll            = time.Hour
)

// waitFlags are the flags of wait and submit -wait.
type waitFlags struct {
	timeout  time.Duration
	poll     time.Duration
	progress bool
}

func (w *waitFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&w.timeout, "timeout", defaultWaitTimeout, "give up waiting after this long (exit 4)")
	fs.DurationVar(&w.poll, "poll", defaultPoll, "interval between status polls")
	fs.BoolVar(&w.progress, "progress", false, "show the live activity stage on stderr (default: when stderr is a terminal)")
}

func (w *waitFlags) check(name string) error {
	if w.timeout <= 0 {
		return usageErr("%s: -timeout must be positive", name)
	}
	if w.poll < minPoll || w.poll > maxPoll {
		return usageErr("%s: -poll must be between %v and %v", name, minPoll, maxPoll)
	}
	return nil
}

// runWait polls until the job is terminal and prints the aggregate.
func runWait(ctx context.Context, c *command, args []string) error {
	var conn connFlags
	var wf waitFlags
	fs := c.flagSet(&conn)
	wf.register(fs)
	positional, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	id, err := c.jobIDArg(positional)
	if err != nil {
		return err
	}
	if err := wf.check(c.name); err != nil {
		return err
	}
	cl, err := c.connect(conn)
	if err != nil {
		return err
	}
	return c.waitAndPrint(ctx, cl, id, wf, true)
}

// waitAndPrint waits for the job to become terminal, prints its aggregate
// and maps the outcome to the exit code: succeeded 0, failed 3, timeout 4.
// When failFast is set the first poll's errors are returned at once (a
// misconfiguration should not wait out the timeout); later network errors
// and 5xx answers, those of the final aggregate fetch included, are retried
// until the timeout.
func (c *command) waitAndPrint(ctx context.Context, cl *client, id string, wf waitFlags, failFast bool) error {
	deadlineCtx, cancel := context.WithTimeout(ctx, wf.timeout)
	defer cancel()
	show := wf.progress || stderrIsTerminal(c.stderr)
	prog := progress{enabled: show, shown: show}
	lastStatus := ""
	var lastErr error
	for first := true; ; first = false {
		job, err := cl.getJob(deadlineCtx, id)
		var agg *Aggregate
		if err == nil && terminal(job.Status) {
			agg, err = cl.getAggregate(deadlineCtx, id)
		}
		switch {
		case err == nil:
			lastStatus, lastErr = job.Status, nil
			if agg != nil {
				return c.printOutcome(id, agg)
			}
			switch job.Status {
			case "leased":
				prog.poll(deadlineCtx, cl, id, c.stderr)
			case statusDelivering:
				prog.delivery(job, c.stderr)
			}
		case ctx.Err() != nil:
			return fail(ExitErr, "", "interrupted")
		case deadlineCtx.Err() != nil:
			// The poll itself ran into the deadline.
		case (first && failFast) || !isTransient(err):
			return err
		default:
			lastErr = err
		}
		timer := time.NewTimer(wf.poll)
		select {
		case <-deadlineCtx.Done():
			timer.Stop()
			if ctx.Err() != nil {
				return fail(ExitErr, "", "interrupted")
			}
			return timedOut(id, lastStatus, lastErr)
		case <-timer.C:
		}
	}
}

func isTransient(err error) bool {
	var f *failure
	return errors.As(err, &f) && f.transient
}

func timedOut(id, lastStatus string, lastErr error) error {
	f := &failure{code: ExitTimedOut, msg: "timed out waiting for job " + id}
	switch {
	case lastStatus != "":
		f.msg += " (last status " + lastStatus + ")"
	case lastErr != nil:
		f.msg += " (last poll: " + lastErr.Error() + ")"
	}
	f.hint = "run `forge wait " + id + "` to keep waiting"
	return f
}

// printOutcome prints the aggregate of a terminal job.
func (c *command) printOutcome(id string, agg *Aggregate) error {
	if !terminal(agg.Job.Status) {
		return invalidResponse(errors.New("a terminal job reported a non-terminal aggregate"))
	}
	if err := c.printJSON(agg); err != nil {
		return err
	}
	if agg.Job.Status == statusFailed {
		msg := "job " + id + " failed"
		if agg.Job.FailureCode != nil {
			msg += ": " + *agg.Job.FailureCode
		}
		return fail(ExitJobFailed, "", "%s", msg)
	}
	return nil
}
