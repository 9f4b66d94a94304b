package cli

import "context"

// runStatus prints the job object.
func runStatus(ctx context.Context, c *command, args []string) error {
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
	job, err := cl.getJob(ctx, id)
	if err != nil {
		return err
	}
	return c.printJSON(job)
}
