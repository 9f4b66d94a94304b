package githubfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/delivery"
)

// runsAnswer is one raw answer of the runs list.
func (d *deliveryFixture) runsAnswer(t *testing.T, query string) (total, listed int, link string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/repos/octo/app/actions/runs?head_sha="+d.sha+query, nil)
	resp, err := (&http.Client{Transport: d.tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		TotalCount int               `json:"total_count"`
		Runs       []json.RawMessage `json:"workflow_runs"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		t.Fatalf("runs answer %d", resp.StatusCode)
	}
	return body.TotalCount, len(body.Runs), resp.Header.Get("Link")
}

// The runs list pages as GitHub documents it (per_page default 30, at
// most 100), and a commit with more runs than one page is delivered only
// once every run passed.
func TestRunsListPages(t *testing.T) {
	d := newDeliveryFixture(t)
	if err := d.api.SetCIRuns("octo", "app", 130); err != nil {
		t.Fatal(err)
	}
	s := d.run(t)
	if s.Phase != delivery.PhaseMerged || s.CIState != delivery.CISuccess {
		t.Fatalf("%+v", s)
	}
	total, listed, link := d.runsAnswer(t, "")
	if total != 130 || listed != 30 || !strings.Contains(link, `page=2>; rel="next"`) || !strings.Contains(link, `page=5>; rel="last"`) {
		t.Fatalf("default page: total %d, %d listed, link %q", total, listed, link)
	}
	if total, listed, link = d.runsAnswer(t, "&per_page=500&page=2"); total != 130 || listed != 30 || link != "" {
		t.Fatalf("last page of 100: total %d, %d listed, link %q", total, listed, link)
	}
	if d.api.SetCIRuns("octo", "app", 0) == nil || d.api.SetCIRuns("octo", "app", 1001) == nil {
		t.Fatal("out-of-range run counts accepted")
	}
}

// A 422 to the merge is a refusal: the delivery ends merge_refused after
// that one request, and it is never retried into github_unavailable.
func TestMergeUnprocessableIsARefusal(t *testing.T) {
	d := newDeliveryFixture(t)
	if err := d.api.SetDeliveryFault(DeliveryFaultMergeUnprocessable, 5); err != nil {
		t.Fatal(err)
	}
	if s := d.run(t); s.Code != delivery.CodeMergeRefused || d.rev(t, "refs/heads/main") != d.base {
		t.Fatalf("%+v", s)
	}
	if left := d.api.ci().faults[DeliveryFaultMergeUnprocessable]; left != 4 {
		t.Fatalf("%d merge requests, want 1", 5-left)
	}
}

// Runs stay listed after their pull request is closed without merge.
func TestRunsOutliveAClosedPullRequest(t *testing.T) {
	d := newDeliveryFixture(t)
	d.api.SetCI("octo", "app", CIFailure)
	if s := d.run(t); s.Code != delivery.CodeCIFailed {
		t.Fatalf("%+v", s)
	}
	if !d.api.SetPullState("octo", "app", 1, "closed", false) {
		t.Fatal("cannot close the pull request")
	}
	if total, listed, _ := d.runsAnswer(t, ""); total != 1 || listed != 1 {
		t.Fatalf("after close: total %d, %d listed", total, listed)
	}
}
