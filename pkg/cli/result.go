package cli

import "context"

// runResult prints the aggregate once, whatever the job's status; it exits
// 0 whenever the aggregate was printed. Use wait to block until terminal.
func runResult(ctx context.Context, c *command, args []string) error {
	return c.readJob(ctx, args, func(ctx context.Context, cl *client, id string) (any, error) {
		return cl.getAggregate(ctx, id)
	})
}
