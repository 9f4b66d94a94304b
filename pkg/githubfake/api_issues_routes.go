package githubfake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The issues routes' table, the request each answers and the list
// paging, conditional GETs and sorting they share (api_issues.go).

// ireq is one request to an issues route.
type ireq struct {
	a           *API
	r           *http.Request
	owner, repo string
	t           *tracker
	tok         *liveToken
	me          *account // the App's bot
	args        []string // the route's {…} segments
	body        []byte
}

// reply is a route's answer: a JSON value, or an error message.
type reply struct {
	status int
	v      any
	link   string
	msg    string
}

func fail(status int, msg string) reply { return reply{status: status, msg: msg} }

var (
	notFound   = fail(http.StatusNotFound, "Not Found")
	forbidden  = fail(http.StatusForbidden, msgNotAccessible)
	badJSON    = fail(http.StatusBadRequest, "Problems parsing JSON")
	validation = fail(http.StatusUnprocessableEntity, "Validation Failed")
)

func (c *ireq) can(perm, level string) bool { return allows(c.tok.perms[perm], level) }

// canIssue: issues at level, or pull_requests for a pull request's
// conversation.
func (c *ireq) canIssue(is *issue, level string) bool {
	return c.can("issues", level) || is != nil && is.Pull != nil && c.can("pull_requests", level)
}

func (c *ireq) num(i int) int {
	n, err := strconv.Atoi(c.args[i])
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

func (c *ireq) id(i int) int64 {
	n, err := strconv.ParseInt(c.args[i], 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// decode reads a JSON object body into v; false on anything else.
func (c *ireq) decode(v any) bool {
	return json.Unmarshal(c.body, v) == nil && strings.HasPrefix(strings.TrimSpace(string(c.body)), "{")
}

// paged cuts items to the request's page and names the others in a Link
// header, as GitHub does.
func (c *ireq) paged(items []any) reply {
	q := c.r.URL.Query()
	perPage, page := defaultPerPage, 1
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return validation
		}
		perPage = min(n, maxPerPage)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return validation
		}
		page = n
	}
	out := []any{}
	if start := (page - 1) * perPage; start < len(items) {
		out = items[start:min(len(items), start+perPage)]
	}
	last := max((len(items)+perPage-1)/perPage, 1)
	at := func(n int) string {
		u := *c.r.URL
		nq := u.Query()
		nq.Set("page", strconv.Itoa(n))
		u.RawQuery = nq.Encode()
		return "<" + apiRoot + u.RequestURI() + ">"
	}
	var links []string
	if page < last {
		links = append(links, at(page+1)+`; rel="next"`, at(last)+`; rel="last"`)
	}
	if page > 1 {
		links = append(links, at(1)+`; rel="first"`, at(min(page-1, last))+`; rel="prev"`)
	}
	return reply{status: http.StatusOK, v: out, link: strings.Join(links, ", ")}
}

// since reads the since parameter (ISO 8601); ok false when malformed.
func (c *ireq) since() (time.Time, bool) {
	v := c.r.URL.Query().Get("since")
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// after reports whether updated is at or after since (GitHub compares
// whole seconds, and includes the second itself).
func after(updated, since time.Time) bool {
	return since.IsZero() || !updated.Truncate(time.Second).Before(since.Truncate(time.Second))
}

// sortOrder reads sort (one of sorts, the first the default) and
// direction (default desc, or asc when defaultAsc).
func (c *ireq) sortOrder(sorts []string, defaultAsc bool) (string, bool, bool) {
	q := c.r.URL.Query()
	s := q.Get("sort")
	if s == "" {
		s = sorts[0]
	}
	if !slices.Contains(sorts, s) {
		return "", false, false
	}
	asc := defaultAsc
	switch q.Get("direction") {
	case "":
	case "asc":
		asc = true
	case "desc":
		asc = false
	default:
		return "", false, false
	}
	return s, asc, true
}

type route struct {
	method  string
	pattern []string // after /repos/{owner}/{repo}/; {n} a number, {s} any segment
	h       func(*ireq) reply
}

var issueRoutes = []route{
	{"GET", []string{"issues"}, (*ireq).listIssues},
	{"GET", []string{"issues", "events"}, (*ireq).repoEvents},
	{"GET", []string{"issues", "comments"}, (*ireq).repoComments},
	{"GET", []string{"issues", "comments", "{n}"}, (*ireq).getComment},
	{"PATCH", []string{"issues", "comments", "{n}"}, (*ireq).updateComment},
	{"GET", []string{"issues", "comments", "{n}", "reactions"}, (*ireq).commentReactions},
	{"POST", []string{"issues", "comments", "{n}", "reactions"}, (*ireq).reactComment},
	{"GET", []string{"issues", "{n}"}, (*ireq).getIssue},
	{"GET", []string{"issues", "{n}", "events"}, (*ireq).issueEvents},
	{"GET", []string{"issues", "{n}", "timeline"}, (*ireq).timeline},
	{"GET", []string{"issues", "{n}", "labels"}, (*ireq).issueLabels},
	{"POST", []string{"issues", "{n}", "labels"}, (*ireq).addLabels},
	{"DELETE", []string{"issues", "{n}", "labels", "{s}"}, (*ireq).removeLabel},
	{"GET", []string{"issues", "{n}", "comments"}, (*ireq).issueComments},
	{"POST", []string{"issues", "{n}", "comments"}, (*ireq).createComment},
	{"GET", []string{"issues", "{n}", "reactions"}, (*ireq).issueReactions},
	{"POST", []string{"issues", "{n}", "reactions"}, (*ireq).reactIssue},
	{"GET", []string{"collaborators", "{s}", "permission"}, (*ireq).permission},
	{"GET", []string{"pulls", "comments"}, (*ireq).repoReviewComments},
	{"GET", []string{"pulls", "comments", "{n}"}, (*ireq).getReviewComment},
	{"GET", []string{"pulls", "comments", "{n}", "reactions"}, (*ireq).reviewCommentReactions},
	{"POST", []string{"pulls", "comments", "{n}", "reactions"}, (*ireq).reactReviewComment},
	{"GET", []string{"pulls", "{n}", "comments"}, (*ireq).pullReviewComments},
	{"GET", []string{"pulls", "{n}", "reviews"}, (*ireq).listReviews},
	{"POST", []string{"pulls", "{n}", "reviews"}, (*ireq).submitReview},
	{"GET", []string{"git", "ref", "heads", "{*}"}, (*ireq).branchRef},
}

func matchRoute(method string, segs []string) (*route, []string) {
	for i := range issueRoutes {
		rt := &issueRoutes[i]
		if n := len(rt.pattern); rt.method != method || len(segs) < n || len(segs) > n && rt.pattern[n-1] != "{*}" {
			continue
		}
		var args []string
		ok := true
		for j, p := range rt.pattern {
			switch p {
			case "{n}":
				if segs[j] == "" || strings.Trim(segs[j], "0123456789") != "" || len(segs[j]) > 18 {
					ok = false
				}
				args = append(args, segs[j])
			case "{s}":
				if segs[j] == "" {
					ok = false
				}
				args = append(args, segs[j])
			case "{*}": // the rest, one or more segments
				rest := strings.Join(segs[j:], "/")
				ok = ok && !slices.Contains(segs[j:], "")
				args = append(args, rest)
			default:
				ok = ok && p == segs[j]
			}
		}
		if ok {
			return rt, args
		}
	}
	return nil, nil
}

// serveIssues answers the issues routes; false when r is none of them.
func (a *API) serveIssues(w http.ResponseWriter, r *http.Request, name string, limit int) bool {
	raw := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	if len(raw) < 4 || raw[0] != "repos" {
		return false
	}
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			return false
		}
		segs[i] = u
	}
	rt, args := matchRoute(r.Method, segs[3:])
	if rt == nil {
		return false
	}
	owner, repo := segs[1], segs[2]
	read := r.Method == http.MethodGet
	switch {
	case a.takeFault(APIFaultPrimary):
		a.spend(w, name, limit, false)
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(a.now().Add(time.Second).Unix(), 10))
		WriteError(w, http.StatusForbidden, "API rate limit exceeded for installation. If you reach out to GitHub Support for help, please include the request ID.")
		return true
	case !read && a.spend(w, name, limit, false):
		limitExceeded(w, name)
		return true
	case a.takeFault(APIFaultServerError):
		if read {
			a.spend(w, name, limit, false)
		}
		WriteError(w, http.StatusBadGateway, "Server Error")
		return true
	case !read && a.takeFault(APIFaultSecondaryRetryAfter):
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
		return true
	case !read && a.takeFault(APIFaultSecondary):
		WriteError(w, http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
		return true
	}
	tok := a.lookupToken(bearer(r))
	var rep reply
	switch {
	case tok == nil:
		rep = fail(http.StatusUnauthorized, msgBadCredentials)
	case !validName(owner) || !validName(repo) || !tok.covers(owner, repo):
		rep = notFound
	default:
		c := &ireq{a: a, r: r, owner: owner, repo: repo, tok: tok, args: args}
		if !read {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxAPIBody+1))
			if err != nil || len(b) > maxAPIBody {
				rep = fail(http.StatusRequestEntityTooLarge, "Request body too large")
				break
			}
			c.body = b
		}
		a.mu.Lock()
		c.t = a.trackerLocked(owner, repo)
		c.me = a.accountLocked(a.BotLogin())
		rep = rt.h(c)
		a.mu.Unlock()
	}
	var body []byte
	if rep.msg == "" {
		body, _ = json.Marshal(rep.v)
	}
	if read {
		notModified := false
		if rep.status == http.StatusOK {
			// GitHub's ETag varies with the credential (Vary:
			// Authorization): a rotated token never matches.
			sum := sha256.Sum256(append([]byte(bearer(r)+"\n"), body...))
			etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
			w.Header().Set("ETag", etag)
			w.Header().Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
			notModified = r.Header.Get("If-None-Match") == etag
		}
		if a.spend(w, name, limit, notModified && tok != nil) {
			limitExceeded(w, name)
			return true
		}
		if notModified {
			w.WriteHeader(http.StatusNotModified)
			return true
		}
	}
	if rep.link != "" {
		w.Header().Set("Link", rep.link)
	}
	if rep.msg != "" {
		WriteError(w, rep.status, rep.msg)
		return true
	}
	if rep.v == nil {
		w.WriteHeader(rep.status)
		return true
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(rep.status)
	w.Write(append(body, '\n'))
	return true
}

// byUpdated orders items by their time (then id), ascending or not.
func byUpdated[T any](items []T, key func(T) (time.Time, int64), asc bool) {
	slices.SortStableFunc(items, func(x, y T) int {
		tx, ix := key(x)
		ty, iy := key(y)
		c := tx.Compare(ty)
		if c == 0 {
			c = compareInt(ix, iy)
		}
		if !asc {
			c = -c
		}
		return c
	})
}

func compareInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
