package publish

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/github"
)

// scriptedGitHub answers PR creation with the next scripted outcome and
// PR listing from what has been "created" so far.
type scriptedGitHub struct {
	creates []string // per POST: "ok", "lost", "5xx", "exists", "no-commits"
	posts   int
	made    []int // numbers of PRs that exist
	gets    int
	sha     string
}

func (s *scriptedGitHub) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	pr := func(n int) map[string]any {
		return map[string]any{"number": n, "state": "open", "merged_at": nil,
			"html_url": "https://github.com/o/r/pull/" + strconv.Itoa(n),
			"head":     map[string]any{"ref": "forge/b", "sha": s.sha, "repo": map[string]any{"full_name": "o/r"}},
			"base":     map[string]any{"ref": "main"}}
	}
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	switch r.Method {
	case http.MethodGet:
		s.gets++
		var list []any
		for _, n := range s.made {
			list = append(list, pr(n))
		}
		reply(200, list)
	case http.MethodPost:
		outcome := s.creates[s.posts]
		s.posts++
		switch outcome {
		case "ok", "lost":
			s.made = append(s.made, 10+s.posts)
			if outcome == "lost" {
				return nil, errors.New("connection reset")
			}
			reply(201, pr(10+s.posts))
		case "5xx":
			reply(502, map[string]string{"message": "Server Error"})
		case "exists":
			reply(422, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"message": "A pull request already exists for o:forge/b."}}})
		case "head-invalid":
			reply(422, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"resource": "PullRequest", "field": "head", "code": "invalid"}}})
		case "invalid-title":
			reply(422, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"resource": "PullRequest", "field": "title", "code": "missing_field"}}})
		case "no-commits":
			reply(422, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"message": "No commits between main and forge/b"}}})
		}
	}
	return w.Result(), nil
}

func TestCreatePRReconciles(t *testing.T) {
	sha := strings.Repeat("c", 40)
	p := &Publication{CandidateSHA: sha, BaseBranch: "main", NewBranch: "forge/b", PRTitle: "t", PRBody: "b"}
	for _, tc := range []struct {
		name    string
		creates []string
		made    []int // PRs that exist before (made by someone else)
		want    int
		created bool
		posts   int
		code    Code
	}{
		{"created", []string{"ok"}, nil, 11, true, 1, ""},
		{"lost answer", []string{"lost"}, nil, 11, true, 1, ""},
		{"already exists", []string{"exists"}, []int{5}, 5, false, 1, ""},
		{"5xx, nothing made, retried", []string{"5xx", "ok"}, nil, 12, true, 2, ""},
		{"5xx every time", []string{"5xx", "5xx", "5xx", "5xx"}, nil, 0, false, 4, CodeAPIFailed},
		{"no commits", []string{"no-commits"}, nil, 0, false, 1, CodePRRefused},
		// GitHub not yet caught up with the push: retried, bounded.
		{"head invalid once", []string{"head-invalid", "ok"}, nil, 12, true, 2, ""},
		{"head invalid every time", []string{"head-invalid", "head-invalid", "head-invalid", "head-invalid"}, nil, 0, false, 4, CodePRRefused},
		{"other 422", []string{"invalid-title"}, nil, 0, false, 1, CodePRRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh := &scriptedGitHub{creates: tc.creates, made: tc.made, sha: sha}
			var slept []time.Duration
			pb := New(&Config{Owner: "o", Repository: "r"}, nil, Env{Transport: gh,
				Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }})
			pr, created, err := pb.createPR(context.Background(), &github.Token{}, p)
			if gh.posts != tc.posts {
				t.Fatalf("%d creations, want %d", gh.posts, tc.posts)
			}
			if tc.code != "" {
				wantCode(t, err, tc.code, StageGitHub)
				return
			}
			if err != nil || pr.Number != tc.want || created != tc.created {
				t.Fatalf("got %+v created=%v err=%v", pr, created, err)
			}
		})
	}
}

// A PR for the branch that appears between the first read and the
// creation (another head) is found only after the branch was pushed:
// GitHub was changed, so the refusal is not exit 3 ("nothing changed").
func TestCreatePRConflictAfterPushIsNotNothingChanged(t *testing.T) {
	p := &Publication{CandidateSHA: strings.Repeat("c", 40), BaseBranch: "main", NewBranch: "forge/b", PRTitle: "t", PRBody: "b"}
	gh := &scriptedGitHub{creates: []string{"exists"}, made: []int{5}, sha: strings.Repeat("d", 40)}
	pb := New(&Config{Owner: "o", Repository: "r"}, nil, Env{Transport: gh,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	_, _, err := pb.createPR(context.Background(), &github.Token{}, p)
	wantCode(t, err, CodePRConflict, StageGitHub)
}
