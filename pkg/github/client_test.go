package github

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// handlerTransport serves requests in-process with h (no network).
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" || r.URL.Host != "api.github.com" {
		return nil, errors.New("unexpected host")
	}
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// fakeClock advances only when the client sleeps.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.t = c.t.Add(d)
	return nil
}

func newTestClient(h http.HandlerFunc) (*Client, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	return New(handlerTransport{h}, clk.now, Options{Sleep: clk.sleep}), clk
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

const tokenValue = "ghs_0123456789abcdefghijABCDEFGHIJ012345"

func testToken() *Token { return &Token{value: tokenValue} }

func TestRateLimitWaits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   func(w http.ResponseWriter, now time.Time)
		minWait time.Duration
		maxWait time.Duration
	}{
		{"retry-after", func(w http.ResponseWriter, _ time.Time) {
			w.Header().Set("Retry-After", "7")
			writeJSON(w, 403, map[string]string{"message": "You have exceeded a secondary rate limit."})
		}, 7 * time.Second, 7 * time.Second},
		{"primary reset", func(w http.ResponseWriter, now time.Time) {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", itoa64(now.Unix()+30))
			writeJSON(w, 403, map[string]string{"message": "API rate limit exceeded for installation ID 1."})
		}, 30 * time.Second, 31 * time.Second},
		{"secondary without retry-after", func(w http.ResponseWriter, _ time.Time) {
			w.Header().Set("X-RateLimit-Remaining", "4000")
			writeJSON(w, 403, map[string]string{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."})
		}, time.Minute, 10 * time.Minute},
		{"429", func(w http.ResponseWriter, _ time.Time) {
			writeJSON(w, 429, map[string]string{"message": "slow down"})
		}, time.Minute, 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n int
			var clk *fakeClock
			c, clk := newTestClient(func(w http.ResponseWriter, r *http.Request) {
				n++
				if n == 1 {
					tc.limit(w, clk.now())
					return
				}
				writeJSON(w, 200, []any{})
			})
			if _, err := c.PullsForBranch(context.Background(), testToken(), "o", "r", "b"); err != nil {
				t.Fatal(err)
			}
			if n != 2 || len(clk.sleeps) != 1 || clk.sleeps[0] < tc.minWait || clk.sleeps[0] > tc.maxWait {
				t.Fatalf("requests %d sleeps %v", n, clk.sleeps)
			}
		})
	}
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

func TestLimitsAreBounded(t *testing.T) {
	var n int
	c, clk := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.Header().Set("Retry-After", "1")
		writeJSON(w, 429, map[string]string{"message": "limit"})
	})
	_, err := c.PullsForBranch(context.Background(), testToken(), "o", "r", "b")
	if !IsClass(err, ClassRateLimited) || n != DefaultAttempts || len(clk.sleeps) != DefaultAttempts-1 {
		t.Fatalf("err %v after %d requests, sleeps %v", err, n, clk.sleeps)
	}
	n = 0
	c, _ = newTestClient(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.Header().Set("Retry-After", "3600")
		writeJSON(w, 403, map[string]string{"message": "limit"})
	})
	if _, err := c.PullsForBranch(context.Background(), testToken(), "o", "r", "b"); !IsClass(err, ClassRateLimited) || n != 1 {
		t.Fatalf("an hour's wait: %v after %d requests", err, n)
	}
}

func TestPermission403IsNotALimit(t *testing.T) {
	var n int
	c, clk := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		n++
		writeJSON(w, 403, map[string]string{"message": "Resource not accessible by integration"})
	})
	_, err := c.PullsForBranch(context.Background(), testToken(), "o", "r", "b")
	if !IsClass(err, ClassPermission) || n != 1 || len(clk.sleeps) != 0 {
		t.Fatalf("err %v, %d requests, sleeps %v", err, n, clk.sleeps)
	}
}

func TestServerErrorsRetriedOnlyWhenSafe(t *testing.T) {
	var gets, posts int
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets++
			if gets < 3 {
				writeJSON(w, 502, map[string]string{"message": "bad gateway"})
				return
			}
			writeJSON(w, 200, []any{})
			return
		}
		posts++
		writeJSON(w, 500, map[string]string{"message": "boom"})
	})
	if _, err := c.PullsForBranch(context.Background(), testToken(), "o", "r", "b"); err != nil || gets != 3 {
		t.Fatalf("GET after 5xx: %v after %d", err, gets)
	}
	if _, err := c.CreatePull(context.Background(), testToken(), "o", "r", "b", "main", "t", "b"); !IsClass(err, ClassServer) || posts != 1 {
		t.Fatalf("POST pulls after 5xx: %v after %d", err, posts)
	}
}

func TestMutationsAreSpaced(t *testing.T) {
	c, clk := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 422, map[string]any{"message": "Validation Failed",
			"errors": []map[string]string{{"message": "A pull request already exists for o:b."}}})
	})
	for i := 0; i < 3; i++ {
		_, err := c.CreatePull(context.Background(), testToken(), "o", "r", "b", "main", "t", "b")
		if !PRExists(err) {
			t.Fatalf("err %v", err)
		}
	}
	if len(clk.sleeps) != 2 || clk.sleeps[0] != time.Second || clk.sleeps[1] != time.Second {
		t.Fatalf("sleeps %v", clk.sleeps)
	}
}

func TestPullsForBranchFiltersIgnoredHeadFilter(t *testing.T) {
	pr := func(n int, ref, repo string) map[string]any {
		return map[string]any{"number": n, "state": "open", "merged_at": nil,
			"html_url": "https://github.com/o/r/pull/" + formatInt(int64(n)),
			"head":     map[string]any{"ref": ref, "sha": strings.Repeat("a", 40), "repo": map[string]any{"full_name": repo}},
			"base":     map[string]any{"ref": "main"}}
	}
	var query string
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		// As if GitHub ignored the head filter: every PR comes back.
		writeJSON(w, 200, []any{pr(1, "other", "o/r"), pr(2, "b", "fork/r"), pr(3, "b", "o/r")})
	})
	got, err := c.PullsForBranch(context.Background(), testToken(), "o", "r", "b")
	if err != nil || len(got) != 1 || got[0].Number != 3 {
		t.Fatalf("got %+v, %v", got, err)
	}
	if !strings.Contains(query, "head=o%3Ab") || !strings.Contains(query, "state=all") {
		t.Fatalf("query %s", query)
	}
}

func TestCreateTokenVerifiesGrant(t *testing.T) {
	want := Permissions{PermContents: Write, PermPullRequests: Write}
	for _, tc := range []struct {
		name    string
		perms   map[string]string
		repos   []map[string]string
		wantErr bool
	}{
		{"exact", want, []map[string]string{{"name": "r"}}, false},
		{"extra permission", map[string]string{PermContents: Write, PermPullRequests: Write, "issues": Write}, []map[string]string{{"name": "r"}}, true},
		{"downgraded", map[string]string{PermContents: "read", PermPullRequests: Write}, []map[string]string{{"name": "r"}}, true},
		{"other repository", want, []map[string]string{{"name": "x"}}, true},
		{"all repositories", want, nil, true},
		// GitHub adds the read-only metadata permission to every token
		// that reaches a repository, requested or not.
		{"implicit metadata read", map[string]string{PermContents: Write, PermPullRequests: Write, "metadata": "read"}, []map[string]string{{"name": "r"}}, false},
		{"metadata write", map[string]string{PermContents: Write, PermPullRequests: Write, "metadata": Write}, []map[string]string{{"name": "r"}}, true},
		{"fewer", map[string]string{PermContents: Write, "metadata": "read"}, []map[string]string{{"name": "r"}}, true},
		{"null permissions", nil, []map[string]string{{"name": "r"}}, true},
		{"canonical name casing", want, []map[string]string{{"name": "R"}}, false},
		{"two repositories", want, []map[string]string{{"name": "r"}, {"name": "x"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]any
			revoked := false
			c, clk := newTestClient(nil)
			c.http.Transport = handlerTransport{http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodDelete {
					revoked = r.Header.Get("Authorization") == "Bearer "+tokenValue
					w.WriteHeader(204)
					return
				}
				b, _ := io.ReadAll(r.Body)
				json.Unmarshal(b, &body)
				writeJSON(w, 201, map[string]any{"token": tokenValue, "expires_at": clk.now().Add(time.Hour).UTC().Format(time.RFC3339),
					"permissions": tc.perms, "repository_selection": "selected", "repositories": tc.repos})
			})}
			tok, err := c.CreateToken(context.Background(), "jwt", 7, "r", want)
			if tc.wantErr {
				if !errors.Is(err, ErrPermissionsMismatch) || tok != nil || !revoked {
					t.Fatalf("err %v tok %v revoked %v", err, tok, revoked)
				}
				return
			}
			if err != nil || tok.Value() != tokenValue {
				t.Fatalf("err %v", err)
			}
			if repos, _ := body["repositories"].([]any); len(repos) != 1 || repos[0] != "r" {
				t.Fatalf("request repositories %v", body["repositories"])
			}
			if p, _ := body["permissions"].(map[string]any); len(p) != 2 || p[PermContents] != Write {
				t.Fatalf("request permissions %v", body["permissions"])
			}
		})
	}
}

func TestErrorsAndTokensNeverShowSecrets(t *testing.T) {
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 401, map[string]string{"message": "Bad credentials " + tokenValue})
	})
	_, err := c.PullsForBranch(context.Background(), testToken(), "o", "r", "b")
	var e *APIError
	if !errors.As(err, &e) || e.Class != ClassUnauthorized || strings.Contains(err.Error(), "ghs_") || strings.Contains(e.msg, tokenValue) {
		t.Fatalf("err %v msg %q", err, e.msg)
	}
	tok := testToken()
	for _, s := range []string{tok.String(), tok.GoString()} {
		if strings.Contains(s, tokenValue) {
			t.Fatal("token formatted")
		}
	}
}

// GitHub's error bodies vary: errors may hold strings as well as
// objects, fields may be null. The message must survive all of them,
// and a permission 403 is never a limit, whatever headers come with it.
func TestErrorBodiesDecodedTolerantly(t *testing.T) {
	for name, tc := range map[string]struct {
		status int
		header map[string]string
		body   string
		class  Class
		exists bool
	}{
		"permission with errors strings": {403, nil,
			`{"message":"Resource not accessible by integration","errors":["x"],"documentation_url":"https://docs.github.com/rest","status":"403"}`, ClassPermission, false},
		"permission with retry-after": {403, map[string]string{"Retry-After": "5"},
			`{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest"}`, ClassPermission, false},
		"permission with remaining 0": {403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000030"},
			`{"message":"Resource not accessible by integration"}`, ClassPermission, false},
		"exists as string": {422, nil,
			`{"message":"Validation Failed","errors":["A pull request already exists for o:b."]}`, ClassValidation, true},
		"exists beside odd entries": {422, nil,
			`{"message":"Validation Failed","errors":[null,7,{"resource":"PullRequest","code":"custom","message":null},{"resource":"PullRequest","code":"custom","message":"A pull request already exists for o:b."}]}`, ClassValidation, true},
		"message null": {422, nil, `{"message":null,"errors":[{"message":"A pull request already exists for o:b."}]}`, ClassValidation, true},
	} {
		t.Run(name, func(t *testing.T) {
			var n int
			c, clk := newTestClient(func(w http.ResponseWriter, r *http.Request) {
				n++
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := c.CreatePull(context.Background(), testToken(), "o", "r", "b", "main", "t", "")
			if !IsClass(err, tc.class) || PRExists(err) != tc.exists || n != 1 || len(clk.sleeps) != 0 {
				t.Fatalf("err %v exists %v after %d requests, sleeps %v", err, PRExists(err), n, clk.sleeps)
			}
		})
	}
}

// GitHub says to page by the Link header: a server that answers in pages
// smaller than per_page (its default is 30) but says rel="next" has more.
func TestPullsForBranchFollowsLinkNext(t *testing.T) {
	pr := func(n int, state string) map[string]any {
		return map[string]any{"number": n, "state": state, "merged_at": nil,
			"html_url": "https://github.com/o/r/pull/" + formatInt(int64(n)),
			"head":     map[string]any{"ref": "b", "sha": strings.Repeat("a", 40), "repo": map[string]any{"full_name": "o/r"}},
			"base":     map[string]any{"ref": "main"}}
	}
	var pages []string
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		page := r.URL.Query().Get("page")
		pages = append(pages, page)
		switch page {
		case "1":
			w.Header().Set("Link", `<https://api.github.com/repositories/1/pulls?head=o%3Ab&state=all&page=2>; rel="next", <https://api.github.com/repositories/1/pulls?head=o%3Ab&state=all&page=2>; rel="last"`)
			writeJSON(w, 200, []any{pr(9, "open")})
		case "2":
			w.Header().Set("Link", `<https://api.github.com/repositories/1/pulls?head=o%3Ab&state=all&page=1>; rel="prev", <https://api.github.com/repositories/1/pulls?head=o%3Ab&state=all&page=1>; rel="first"`)
			writeJSON(w, 200, []any{pr(4, "closed")})
		default:
			writeJSON(w, 200, []any{})
		}
	})
	got, err := c.PullsForBranch(context.Background(), testToken(), "o", "r", "b")
	if err != nil || len(got) != 2 || got[1].Number != 4 || len(pages) != 2 {
		t.Fatalf("got %+v, %v after pages %v", got, err, pages)
	}
}
