package worker

import (
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Live activity (live_activity/v1). Every lane offers activity.Offer() in
// its hello. A lease that selects a version this Worker does not know, or
// that carries an activity payload, fails with CodeInvalidActivity before
// anything runs. Otherwise the lane gives the attempt an activity.Tracker
// (Attempt.Stages); executors feed it plugin progress stages
// and check-batch boundaries, and the lane sends each emitted stage as an
// activity message (no seq, never answered) while the lease is held.

// leaseActivityCode returns CodeInvalidActivity when the lease must be
// refused before execution, else "".
func leaseActivityCode(l *wire.Lease) string {
	if len(l.Activity) != 0 || (l.ActivityVersion != "" && !activity.Known(l.ActivityVersion)) {
		return CodeInvalidActivity
	}
	return ""
}

// sendActivity writes one activity message for the lane's current attempt.
func sendActivity(conn *wire.Conn, p activity.Payload) error {
	b, err := wire.EncodeActivity(&p)
	if err != nil {
		return err
	}
	return conn.SendEncoded(b, time.Now().Add(sendTimeout))
}
