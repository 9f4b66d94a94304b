package cli

import "context"

// runEvents prints the job's ordered event array.
func runEvents(ctx context.Context, c *command, args []string) error {
	return c.readJob(ctx, args, func(ctx context.Context, cl *client, id string) (any, error) {
		return cl.getEvents(ctx, id)
	})
}
