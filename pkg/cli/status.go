package cli

import "context"

// runStatus prints the job object.
func runStatus(ctx context.Context, c *command, args []string) error {
	return c.readJob(ctx, args, func(ctx context.Context, cl *client, id string) (any, error) {
		return cl.getJob(ctx, id)
	})
}
