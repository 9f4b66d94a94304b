package gate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

func sameJobJSON(t *testing.T, j store.Job) {
	t.Helper()
	got, err := jobJSON(j)
	want, wantErr := json.Marshal(j)
	if err != nil || wantErr != nil || !bytes.Equal(got, want) {
		t.Fatalf("jobJSON %s (%v)\njson.Marshal %s (%v)", got, err, want, wantErr)
	}
}

func TestJobJSONMatchesMarshal(t *testing.T) {
	at := store.Time{Time: time.Date(2026, 12, 1, 13, 0, 0, 123456000, time.UTC)}
	zoned := store.Time{Time: time.Date(2026, 12, 1, 14, 0, 0, 0, time.FixedZone("x", 3600))}
	out := "done <b>&</b>"
	for _, j := range []store.Job{
		{ID: "0190a1b2c3d4e5f60718293a4b5c6d7e", Kind: "text", Status: "queued", CreatedAt: at, UpdatedAt: at},
		{ID: "j", Kind: "coding", Status: "leased", RepositoryID: "repo-1", AttemptCount: 3, CreatedAt: zoned, UpdatedAt: at},
		{ID: "j", Kind: "coding", Status: "failed", FailureCode: "plugin_failed", CandidateSHA: "0123456789abcdef0123456789abcdef01234567",
			RetryAt: &at, AttemptCount: -1},
		{ID: "j", Kind: "text", Status: "succeeded", Result: &out},
		{ID: "j", Kind: "coding", Status: "succeeded", Delivery: &store.DeliveryView{Phase: "pending", Branch: "b"}},
		{ID: "a<b", Kind: "t&xt", Status: "é", FailureCode: "\x01", RepositoryID: `"\`},
		{Pool: "p", PluginID: "x", BaseSHA: "s", TestArgCounts: []int{1}},
		{},
	} {
		sameJobJSON(t, j)
	}
	// A submitted job is encoded without reflection.
	if !plainJSON("0190a1b2c3d4e5f60718293a4b5c6d7e") || plainJSON("a>b") || plainJSON("\x7f") {
		t.Fatal("plainJSON misjudges")
	}
}

// jobJSON writes each JSON field of store.Job by hand: a new field must be
// added there (and to TestJobJSONMatchesMarshal) before this list changes.
func TestJobJSONKnowsEveryField(t *testing.T) {
	known := []string{"id", "kind", "status", "failure_code,omitempty", "result,omitempty", "candidate_sha,omitempty",
		"repository_id,omitempty", "attempt_count", "retry_at,omitempty", "delivery,omitempty", "usage,omitempty", "created_at", "updated_at"}
	var tags []string
	typ := reflect.TypeOf(store.Job{})
	for i := 0; i < typ.NumField(); i++ {
		if tag := typ.Field(i).Tag.Get("json"); tag != "-" {
			tags = append(tags, tag)
		}
	}
	if !reflect.DeepEqual(tags, known) {
		t.Fatalf("store.Job's JSON fields are %q, jobJSON knows %q: update jobJSON", tags, known)
	}
}

// FuzzJobJSON: for any strings, counts and times, jobJSON writes
// json.Marshal's bytes.
func FuzzJobJSON(f *testing.F) {
	f.Add("0190a1b2c3d4e5f60718293a4b5c6d7e", "text", "queued", "", "", "", 0, int64(1764594000123456), false)
	f.Add("j", "coding", "failed", "plugin_failed", "abc", "repo", 2, int64(-5), true)
	f.Add("<&>", "\u2028", "\"", "\\", "\xff", "é", -1, int64(0), true)
	f.Fuzz(func(t *testing.T, id, kind, status, code, sha, repo string, attempts int, us int64, retry bool) {
		at := store.Time{Time: time.UnixMicro(us).UTC()}
		j := store.Job{ID: id, Kind: kind, Status: status, FailureCode: code, CandidateSHA: sha, RepositoryID: repo,
			AttemptCount: attempts, CreatedAt: at, UpdatedAt: store.Time{Time: at.Add(time.Second)}}
		if retry {
			j.RetryAt = &at
		}
		sameJobJSON(t, j)
	})
}
