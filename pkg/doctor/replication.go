package doctor

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/0k-lab/agent-forge/pkg/install"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// maxReplicaLag is the oldest last confirmed sync a healthy replica has:
// Litestream confirms one every sync interval (1 s by default), idle or
// not.
const maxReplicaLag = time.Minute

// checkReplication asks Litestream's control socket (gate.json
// replication_socket) how the Gate's database is replicated: with
// replication on, Litestream must be replicating it and have confirmed a
// sync of the replica within maxReplicaLag. It reads Litestream's /list
// only (no sync is requested, nothing is written) and notes the mode, the
// lag and the replica's last confirmed sync. With replication off it
// passes and notes nothing.
func (d *doctor) checkReplication() string {
	var c struct {
		Mode   string `json:"replication"`
		Socket string `json:"replication_socket"`
	}
	ok, err := d.gateConfig(&c)
	if !ok {
		return "the Gate config cannot be read"
	}
	if err != nil {
		return "the Gate config's replication is not valid"
	}
	switch c.Mode {
	case "", store.ReplicationOff:
		return ""
	case store.ReplicationAsync, store.ReplicationSync:
	default:
		return "the Gate config's replication is not valid"
	}
	if !filepath.IsAbs(c.Socket) || filepath.Clean(c.Socket) != c.Socket {
		return "the Gate config's replication_socket is not valid"
	}
	st, err := store.ReadReplicaState(d.ctx, install.RealPath(d.f, c.Socket), install.RealPath(d.f, install.Database))
	if err != nil {
		return "replication " + c.Mode + ": Litestream's control socket does not describe the Gate's database (is its unit running?)"
	}
	now := d.now()
	lag, synced := st.Lag(now)
	if !synced {
		d.note(fmt.Sprintf("replication mode=%s status=%s lag_seconds=unknown replica_last_sync=never", c.Mode, st.Status))
		return "replication " + c.Mode + ": the replica has not confirmed a sync yet"
	}
	d.note(fmt.Sprintf("replication mode=%s status=%s lag_seconds=%.3f replica_last_sync=%s",
		c.Mode, st.Status, lag.Seconds(), st.LastSync.Format(time.RFC3339Nano)))
	switch {
	case st.Status != "replicating":
		return "replication " + c.Mode + ": Litestream does not replicate the Gate's database"
	case lag > maxReplicaLag:
		return fmt.Sprintf("replication %s: the replica last confirmed a sync %.0f s ago (more than %.0f s)", c.Mode, lag.Seconds(), maxReplicaLag.Seconds())
	}
	return ""
}
