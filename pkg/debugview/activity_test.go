package debugview

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
)

// fakeActivity returns canned events per job and counts calls.
type fakeActivity struct {
	events map[string][]activity.Event
	calls  int
}

func (f *fakeActivity) Job(id string) []activity.Event {
	f.calls++
	return f.events[id]
}

func TestLiveActivityRoute(t *testing.T) {
	at := time.Date(2026, 11, 29, 20, 0, 1, 234567000, time.UTC)
	src := &fakeActivity{events: map[string][]activity.Event{
		"j_0001": {
			{JobID: "j_0001", AttemptID: "a_1", Ordinal: 2, Lane: "worker-1#1", Stage: activity.StageAnalyzing, At: at},
			{JobID: "j_0001", AttemptID: "a_1", Ordinal: 2, Lane: "worker-1#1", Stage: activity.StageEditing, At: at.Add(time.Second)},
			{JobID: "j_0001", AttemptID: "a_1", Ordinal: 2, Lane: "worker-1#1", Stage: activity.Stage("running: " + plantedSecrets[1]), At: at},
			{JobID: "j_0002", AttemptID: "a_2", Ordinal: 1, Lane: "worker-2", Stage: activity.StageTesting, At: at},
		},
	}}
	s := newFakeStore(3, 1)
	f := &fixture{store: s, h: New(s, ownerOnly, fixedNow, WithActivity(src))}

	wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs/j_0001/activity", false), http.StatusUnauthorized, "unauthorized")
	if rec := f.do(t, http.MethodPost, "/v1/debug/jobs/j_0001/activity", true); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", rec.Code)
	}
	if src.calls != 0 {
		t.Fatal("activity read for a refused request")
	}

	rec := f.do(t, http.MethodGet, "/v1/debug/jobs/j_0001/activity", true)
	page := decode[activityPage](t, rec)
	want := []activityView{
		{Attempt: 2, AttemptID: "a_1", WorkerID: "worker-1#1", Stage: "analyzing", At: "2026-11-29T20:00:01.234567Z"},
		{Attempt: 2, AttemptID: "a_1", WorkerID: "worker-1#1", Stage: "editing", At: "2026-11-29T20:00:02.234567Z"},
	}
	if !page.Live || !reflect.DeepEqual(page.Activity, want) || page.AsOf != "2026-11-29T20:00:00.000000Z" {
		t.Fatalf("activity page %+v", page) // invalid stage and other job's event dropped
	}
	if s.callCount() != 0 {
		t.Fatal("the activity route read the store")
	}

	rec = f.do(t, http.MethodGet, "/v1/debug/jobs/j_0002/activity", true)
	raw := rec.Body.String()
	if page := decode[activityPage](t, rec); !page.Live || len(page.Activity) != 0 || !strings.Contains(raw, `"activity":[]`) {
		t.Fatalf("no activity: %s", raw)
	}
	// A job without live activity is looked up: unknown ones are 404.
	wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs/j_0003/activity", true), http.StatusNotFound, "not_found")
	wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs/j_0001/activity?limit=5", true), http.StatusBadRequest, "invalid_query")
	wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs/..%2Fx/activity", true), http.StatusNotFound, "not_found")
	wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs/j_0001/activity/more", true), http.StatusNotFound, "not_found")

	// Without WithActivity the route says live activity is off.
	plain := newFixture(t, 1, 1)
	rec = plain.do(t, http.MethodGet, "/v1/debug/jobs/j_0000/activity", true)
	if page := decode[activityPage](t, rec); page.Live || len(page.Activity) != 0 {
		t.Fatalf("disabled activity %+v", page)
	}
}

func TestActivityFieldAllowlist(t *testing.T) {
	for typ, fields := range map[reflect.Type][]string{
		reflect.TypeOf(activityView{}): {"at", "attempt", "attempt_id", "stage", "worker_id"},
		reflect.TypeOf(activityPage{}): {"activity", "as_of", "live"},
	} {
		var got []string
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			got = append(got, name)
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, fields) {
			t.Errorf("%s fields %v, want %v", typ.Name(), got, fields)
		}
	}
}

// The real in-memory store plugs in directly.
func TestActivityStoreIsASource(t *testing.T) {
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	st := activity.NewStore(func() time.Time { return now })
	lease := activity.Lease{JobID: "j_0001", AttemptID: "a_1", Ordinal: 1, Lane: "worker-1", Generation: strings.Repeat("ab", 16),
		Version: activity.Version, Deadline: now.Add(time.Minute)}
	if !st.Begin(lease) {
		t.Fatal("lease not tracked")
	}
	if _, err := st.Record("worker-1", lease.Generation, activity.Payload{JobID: "j_0001", AttemptID: "a_1", Version: activity.Version, Stage: activity.StageAnalyzing}); err != nil {
		t.Fatal(err)
	}
	s := newFakeStore(1, 0)
	h := New(s, ownerOnly, fixedNow, WithActivity(st))
	req := httptest.NewRequest(http.MethodGet, "/v1/debug/jobs/j_0001/activity", nil)
	req.Header.Set("Authorization", "Bearer "+ownerToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	page := decode[activityPage](t, rec)
	if len(page.Activity) != 1 || page.Activity[0].Stage != "analyzing" || page.Activity[0].WorkerID != "worker-1" || page.Activity[0].At != "2026-11-29T20:00:00.000000Z" {
		t.Fatalf("activity %+v", page)
	}
}
