package debugview

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

//go:embed static/index.html static/app.js static/app.css
var static embed.FS

const (
	defaultLimit = 25
	maxLimit     = 100
	// maxAttempts bounds the attempts listed in one timeline.
	maxAttempts = 100
	// maxJobIDLen bounds the {id} path segment.
	maxJobIDLen = 128
)

// contentSecurityPolicy allows only same-origin script, style, images and
// fetches; no inline code, no framing, no forms, no base URL changes.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

type handler struct {
	store        Reader
	authenticate func(*http.Request) bool
	now          func() time.Time
	cursors      cursorCodec
	activity     ActivitySource // nil: live activity is not enabled
}

// New returns the viewer. authenticate decides whether a JSON request
// carries the owner's credentials; now stamps responses. Each handler has
// its own random cursor key.
func New(store Reader, authenticate func(*http.Request) bool, now func() time.Time, opts ...Option) http.Handler {
	h := &handler{store: store, authenticate: authenticate, now: now}
	for _, o := range opts {
		o(h)
	}
	if _, err := rand.Read(h.cursors.key[:]); err != nil {
		panic("debugview: no randomness for the cursor key")
	}
	return h
}

func securityHeaders(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	path := r.URL.Path
	switch {
	case path == "/debug":
		http.Redirect(w, r, "/debug/", http.StatusMovedPermanently)
	case strings.HasPrefix(path, "/debug/"):
		h.serveStatic(w, r)
	case strings.HasPrefix(path, "/v1/debug/"):
		h.serveAPI(w, r)
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such route")
	}
}

func (h *handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "only GET is allowed")
		return
	}
	var name, ctype string
	switch r.URL.Path {
	case "/debug/", "/debug/index.html":
		name, ctype = "static/index.html", "text/html; charset=utf-8"
	case "/debug/app.js":
		name, ctype = "static/app.js", "text/javascript; charset=utf-8"
	case "/debug/app.css":
		name, ctype = "static/app.css", "text/css; charset=utf-8"
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such route")
		return
	}
	body, err := static.ReadFile(name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "internal error")
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}

func (h *handler) serveAPI(w http.ResponseWriter, r *http.Request) {
	if !h.authenticate(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-forge"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "owner token required")
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "only GET is allowed")
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/debug/")
	if id, ok := strings.CutSuffix(strings.TrimPrefix(rest, "jobs/"), "/activity"); ok && strings.HasPrefix(rest, "jobs/") {
		if !validJobID(id) {
			writeError(w, http.StatusNotFound, "not_found", "no such job")
			return
		}
		h.liveActivity(r.Context(), w, id, r.URL.RawQuery)
		return
	}
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_query", err.Error())
		return
	}
	switch {
	case rest == "jobs":
		h.jobs(w, r.Context(), q)
	case rest == "workers":
		h.lanes(w, r.Context(), q)
	case strings.HasPrefix(rest, "jobs/"):
		id := strings.TrimPrefix(rest, "jobs/")
		if !validJobID(id) {
			writeError(w, http.StatusNotFound, "not_found", "no such job")
			return
		}
		h.timeline(w, r.Context(), id, q)
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such route")
	}
}

type query struct {
	limit  int
	cursor string
}

// parseQuery accepts only limit and cursor, each at most once.
func parseQuery(raw string) (query, error) {
	q := query{limit: defaultLimit}
	if len(raw) > 2*maxCursorLen {
		return q, errors.New("query too long")
	}
	values, err := url.ParseQuery(raw)
	if err != nil {
		return q, errors.New("malformed query")
	}
	for key, vals := range values {
		if len(vals) != 1 {
			return q, errors.New("repeated query parameter")
		}
		switch key {
		case "limit":
			n, err := strconv.Atoi(vals[0])
			if err != nil || n < 1 || n > maxLimit {
				return q, errors.New("limit must be an integer from 1 to 100")
			}
			q.limit = n
		case "cursor":
			if vals[0] == "" {
				return q, errors.New("empty cursor")
			}
			q.cursor = vals[0]
		default:
			return q, errors.New("unknown query parameter")
		}
	}
	return q, nil
}

func validJobID(id string) bool {
	if id == "" || len(id) > maxJobIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		if b != '_' && b != '-' && (b < 'a' || b > 'z') && (b < 'A' || b > 'Z') && (b < '0' || b > '9') {
			return false
		}
	}
	return true
}

func (h *handler) jobs(w http.ResponseWriter, ctx context.Context, q query) {
	var after string
	if q.cursor != "" {
		var err error
		if after, err = h.cursors.jobsPosition(q.cursor); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_cursor", "the cursor is not valid here")
			return
		}
	}
	jobs, err := h.store.DebugJobs(ctx, after, q.limit+1)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	page := jobsPage{Jobs: []jobView{}, AsOf: stamp(h.now())}
	if len(jobs) > q.limit {
		jobs = jobs[:q.limit]
		page.NextCursor = h.cursors.jobsCursor(jobs[len(jobs)-1].ID)
	}
	for _, j := range jobs {
		page.Jobs = append(page.Jobs, viewJob(j))
	}
	writeJSON(w, page)
}

func (h *handler) lanes(w http.ResponseWriter, ctx context.Context, q query) {
	var after string
	if q.cursor != "" {
		var err error
		if after, err = h.cursors.lanesPosition(q.cursor); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_cursor", "the cursor is not valid here")
			return
		}
	}
	lanes, err := h.store.DebugLanes(ctx, after, q.limit+1)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	page := lanesPage{Lanes: []laneView{}, AsOf: stamp(h.now())}
	if len(lanes) > q.limit {
		lanes = lanes[:q.limit]
		page.NextCursor = h.cursors.lanesCursor(lanes[len(lanes)-1].Lane)
	}
	for _, l := range lanes {
		page.Lanes = append(page.Lanes, viewLane(l))
	}
	writeJSON(w, page)
}

func (h *handler) timeline(w http.ResponseWriter, ctx context.Context, id string, q query) {
	var afterSeq int64
	if q.cursor != "" {
		var err error
		if afterSeq, err = h.cursors.eventsPosition(id, q.cursor); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_cursor", "the cursor is not valid here")
			return
		}
	}
	job, attempts, err := h.store.DebugJob(ctx, id)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	events, err := h.store.DebugEvents(ctx, id, afterSeq, q.limit+1)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	page := timelinePage{Job: viewJob(job), Attempts: []attemptView{}, Events: []eventView{}, AsOf: stamp(h.now())}
	if len(attempts) > maxAttempts {
		attempts = attempts[:maxAttempts]
	}
	for _, a := range attempts {
		page.Attempts = append(page.Attempts, viewAttempt(a))
	}
	if len(events) > q.limit {
		events = events[:q.limit]
		page.NextCursor = h.cursors.eventsCursor(id, events[len(events)-1].Seq)
	}
	for _, e := range events {
		page.Events = append(page.Events, viewEvent(e))
	}
	writeJSON(w, page)
}

func writeStoreError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no such job")
		return
	}
	writeError(w, http.StatusServiceUnavailable, "unavailable", "gate could not complete the request")
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "internal error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n'))
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, message
	body, _ := json.Marshal(b)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
