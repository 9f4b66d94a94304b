package store

import (
	"context"
	"database/sql"
)

// checkpointEvery is how many commits pass between checkpoint requests.
const checkpointEvery = 64

// walBackstopPages is the writer connection's own wal_autocheckpoint: it
// only matters if the checkpointer falls far behind.
const walBackstopPages = 16384

// checkpointer copies WAL content back into the database file on its own
// connection, so the writer's COMMIT never pays for a checkpoint. The
// writer kicks it every checkpointEvery commits; it runs PASSIVE
// checkpoints, which never block the writer or readers.
type checkpointer struct {
	db   *sql.DB
	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

func newCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *checkpointer) loop() {
	defer close(c.done)
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
			// A failure is retried at the next kick; the writer's
			// backstop autocheckpoint bounds the WAL meanwhile.
			c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

// request asks for a checkpoint without waiting.
func (c *checkpointer) request() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) stop() error {
	close(c.quit)
	<-c.done
	return c.db.Close()
}
