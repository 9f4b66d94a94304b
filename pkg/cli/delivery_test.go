package cli

import (
	"strings"
	"testing"
)

func TestWaitContinuesThroughDelivery(t *testing.T) {
	g := newFakeGate(t, testToken)
	env := gateEnv(g)
	submit := func(repo string) string {
		r := runForge(t, env, `{"repository_id":"`+repo+`","base_sha":"0123456789abcdef0123456789abcdef01234567","instruction":"Fix it."}`,
			"submit", "-file", "-")
		wantCode(t, r, ExitOK)
		return decodeOut[Job](t, r).ID
	}

	id := submit("deliver-ok")
	r := runForge(t, env, "", "wait", "-poll", "10ms", "-progress", id)
	wantCode(t, r, ExitOK)
	want := "forge: progress: delivery push\nforge: progress: delivery ci (ci pending)\n"
	if r.stderr != want {
		t.Fatalf("progress %q, want %q", r.stderr, want)
	}
	agg := decodeOut[Aggregate](t, r)
	if d := agg.Job.Delivery; agg.Job.Status != "succeeded" || d == nil || d.Phase != "merged" || d.MergeSHA == nil {
		t.Fatalf("merged job %+v", agg.Job)
	}

	// A delivery failure is a job failure: exit 3 with the code.
	r = runForge(t, env, "", "wait", "-poll", "10ms", submit("deliver-ci-fail"))
	wantCode(t, r, ExitJobFailed)
	if !strings.Contains(r.stderr, "ci_failed") {
		t.Fatalf("stderr %q", r.stderr)
	}

	// submit -wait continues through delivery too.
	r = runForge(t, env, `{"repository_id":"deliver-ok","base_sha":"0123456789abcdef0123456789abcdef01234567","instruction":"Fix it."}`,
		"submit", "-file", "-", "-wait", "-poll", "10ms")
	wantCode(t, r, ExitOK)
	if decodeOut[Aggregate](t, r).Job.Delivery.Phase != "merged" {
		t.Fatal("submit -wait stopped before the merge")
	}
}

func TestDeliveryObjectValidation(t *testing.T) {
	s := func(v string) *string { return &v }
	sha := "89abcdef0123456789abcdef0123456789abcdef"
	ok := Delivery{Phase: "merged", Branch: "forge/job-j1", PRURL: s("https://github.com/o/r/pull/1"), CIState: s("success"), MergeSHA: &sha}
	if err := ok.Validate("delivery"); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]Delivery{
		"phase":          {Phase: "shipping", Branch: "forge/job-j1"},
		"branch":         {Phase: "push", Branch: "-x"},
		"url creds":      {Phase: "ci", Branch: "b", PRURL: s("https://x-access-token:ghs_1@github.com/o/r/pull/1")},
		"url host":       {Phase: "ci", Branch: "b", PRURL: s("https://evil.example/o/r/pull/1")},
		"ci state":       {Phase: "ci", Branch: "b", CIState: s("green")},
		"merged no sha":  {Phase: "merged", Branch: "b"},
		"sha not merged": {Phase: "ci", Branch: "b", MergeSHA: &sha},
		"failed no code": {Phase: "failed", Branch: "b"},
		"code bad":       {Phase: "failed", Branch: "b", FailureCode: s("CI failed: see logs")},
	} {
		if err := d.Validate("delivery"); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
