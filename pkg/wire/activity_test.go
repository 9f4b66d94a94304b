package wire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/activity"
)

func TestActivityMessages(t *testing.T) {
	const job = "0123456789abcdef0123456789abcdef"
	act := `{"job_id":"` + job + `","attempt_id":"a1","version":"live_activity/v1","stage":"testing"}`
	good := map[string]string{
		"activity":             `{"type":"activity","activity":` + act + `}`,
		"hello without offer":  `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"w","slot":0,"plugins":[],"repositories":[]}}`,
		"hello unknown offer":  `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"w","slot":0,"plugins":[],"repositories":[],"activity_versions":["live_activity/v7"]}}`,
		"lease unknown select": `{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"2026-01-01T00:00:00Z","kind":"text","policy":{},"task":{"input":"x"},"activity_version":"live_activity/v7"}}`,
	}
	for name, msg := range good {
		t.Run(name, func(t *testing.T) {
			e, err := Decode([]byte(msg))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			enc, err := Encode(e)
			if err != nil || !bytes.Equal(enc, []byte(msg)) {
				t.Fatalf("re-encoded %s (%v)", enc, err)
			}
		})
	}
	nine := `"v1","v2","v3","v4","v5","v6","v7","v8","v9"`
	bad := map[string]string{
		"activity with seq":    `{"type":"activity","seq":1,"activity":` + act + `}`,
		"activity no version":  `{"type":"activity","activity":{"job_id":"j","attempt_id":"a","stage":"testing"}}`,
		"activity bad stage":   `{"type":"activity","activity":{"job_id":"j","attempt_id":"a","version":"live_activity/v1","stage":"finalizing"}}`,
		"activity text":        `{"type":"activity","activity":{"job_id":"j","attempt_id":"a","version":"live_activity/v1","stage":"editing","text":"x"}}`,
		"activity at":          `{"type":"activity","activity":{"job_id":"j","attempt_id":"a","version":"live_activity/v1","stage":"editing","at":"2026-01-01T00:00:00Z"}}`,
		"activity null":        `{"type":"activity","activity":null}`,
		"activity in lease":    `{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"2026-01-01T00:00:00Z","kind":"text","policy":{},"task":{"input":"x"}},"activity":` + act + `}`,
		"offer too long":       `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"w","slot":0,"plugins":[],"repositories":[],"activity_versions":[` + nine + `]}}`,
		"offer bad name":       `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"w","slot":0,"plugins":[],"repositories":[],"activity_versions":["A B"]}}`,
		"offer not list":       `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"w","slot":0,"plugins":[],"repositories":[],"activity_versions":"live_activity/v1"}}`,
		"lease version object": `{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"2026-01-01T00:00:00Z","kind":"text","policy":{},"task":{"input":"x"},"activity_version":{}}}`,
		"lease version long":   `{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"2026-01-01T00:00:00Z","kind":"text","policy":{},"task":{"input":"x"},"activity_version":"` + strings.Repeat("v", 65) + `"}}`,
	}
	for name, msg := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode([]byte(msg)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestLeaseActivityPayloadReachesTheWorker: a lease carrying an activity
// payload decodes, so that the Worker can fail the attempt with a code
// instead of dropping the connection.
func TestLeaseActivityPayloadReachesTheWorker(t *testing.T) {
	msg := `{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"2026-01-01T00:00:00Z","kind":"text","policy":{},"task":{"input":"x"},"activity":{"stage":"editing"}}}`
	e, err := Decode([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Lease.Activity) == 0 {
		t.Fatal("payload lost")
	}
	if d, ok := DispositionOf(FailureInvalidActivity); !ok || d != DispositionTerminal {
		t.Fatalf("invalid_activity: %q %v", d, ok)
	}
}

func TestActivityEncodeOmitsAbsentFields(t *testing.T) {
	b, err := Encode(Envelope{Type: TypeHello, Hello: &Hello{Protocol: Protocol, WorkerID: "w"}})
	if err != nil || bytes.Contains(b, []byte("activity")) {
		t.Fatalf("%s %v", b, err)
	}
	b, err = Encode(Envelope{Type: TypeActivity, Activity: &Activity{JobID: "j", AttemptID: "a", Version: activity.Version, Stage: activity.StageEditing}})
	if err != nil || string(b) != `{"type":"activity","activity":{"job_id":"j","attempt_id":"a","version":"live_activity/v1","stage":"editing"}}` {
		t.Fatalf("%s %v", b, err)
	}
}
