package cli

import "context"

// runResult prints the aggregate once, whatever the job's status; it exits
// 0 whenever the aggregate was printed. Use wait to block until terminal.
func runResult(ctx context.Context, c *command, args []string) error {
	var conn connFlags
	fs := c.flagSet(&conn)
	positional, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	id, err := c.jobIDArg(positional)
	if err != nil {
		return err
	}
	cl, err := c.connect(conn)
	if err != nil {
		return err
	}
	agg, err := cl.getAggregate(ctx, id)
	if err != nil {
		return err
	}
	return c.printJSON(agg)
}
