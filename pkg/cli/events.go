package cli

import "context"

// runEvents prints the job's ordered event array.
func runEvents(ctx context.Context, c *command, args []string) error {
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
	events, err := cl.getEvents(ctx, id)
	if err != nil {
		return err
	}
	return c.printJSON(events)
}
