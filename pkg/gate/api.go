package gate

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/debugview"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

var errTooManyConns = &apiError{http.StatusTooManyRequests, "too_many_connections", "this worker has too many open connections"}

// Handler returns the Gate's HTTP routes (docs/api.md).
func (g *Gate) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", g.handleReady)
	mux.HandleFunc("/v1/version", g.owner(http.MethodGet, g.handleVersion))
	mux.HandleFunc("/metrics", g.owner(http.MethodGet, g.handleMetrics))
	mux.HandleFunc("/v1/jobs", g.owner(http.MethodPost, g.handleSubmit))
	mux.HandleFunc("/v1/jobs/{id}", g.owner(http.MethodGet, g.handleJob))
	mux.HandleFunc("/v1/jobs/{id}/events", g.owner(http.MethodGet, g.handleEvents))
	mux.HandleFunc("/v1/jobs/{id}/aggregate", g.owner(http.MethodGet, g.handleAggregate))
	mux.HandleFunc(wire.Path, g.handleWorker)
	mux.HandleFunc(wire.SourcePath, g.handleSource)
	mux.HandleFunc(wire.CandidatePath, g.handleCandidate)
	// The debug viewer: a public static shell under /debug/ and owner-only
	// JSON reads under /v1/debug/ (the same owner check as the API, and
	// not_ready until the startup sweep is done). Its store reads take the
	// Gate's one path for a store failure.
	viewer := debugview.New(debugReader{debugview.FromStore(g.st, g.poolOf), g}, func(r *http.Request) bool {
		return g.sec.identify(r).owner
	}, g.now, debugview.WithActivity(g.act))
	mux.Handle("/debug/", viewer)
	mux.Handle("/v1/debug/", g.readyFor(viewer))
	// Without these, ServeMux redirects "/debug" to "/debug/" (HTML body).
	mux.HandleFunc("/debug", notFound)
	mux.HandleFunc("/v1/debug", notFound)
	mux.HandleFunc("/", notFound)
	return cleanPaths(mux)
}

func notFound(w http.ResponseWriter, _ *http.Request) { writeError(w, errRouteNotFound) }

// cleanPaths answers a request whose path is not in canonical form
// ("/v1//jobs", "/v1/./jobs", "/a/../b") with the documented not_found
// error, before any route sees it; ServeMux would otherwise redirect it
// with an HTML body.
func cleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		clean := path.Clean(p)
		if strings.HasSuffix(p, "/") && clean != "/" {
			clean += "/"
		}
		if p == "" || clean != p {
			writeError(w, errRouteNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// jsonBody reports whether a request's Content-Type allows a JSON body:
// absent, or exactly one application/json header whose only parameter, if
// any, is charset=utf-8.
func jsonBody(h http.Header) bool {
	v := h.Values("Content-Type")
	if len(v) == 0 {
		return true
	}
	if len(v) != 1 {
		return false
	}
	mt, params, err := mime.ParseMediaType(v[0])
	if err != nil || mt != "application/json" {
		return false
	}
	for k, val := range params {
		if k != "charset" || !strings.EqualFold(val, "utf-8") {
			return false
		}
	}
	return true
}

// poolOf names the pool of a configured Worker id ("" if unknown).
func (g *Gate) poolOf(workerID string) string {
	for i := range g.cfg.Workers {
		if g.cfg.Workers[i].ID == workerID {
			return g.cfg.Workers[i].Pool
		}
	}
	return ""
}

// owner wraps an owner route: owner token first, then the method.
func (g *Gate) owner(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !g.sec.identify(r).owner {
			writeError(w, errUnauthorized)
			return
		}
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, errMethod)
			return
		}
		if !g.ready.Load() {
			writeError(w, errNotReady)
			return
		}
		h(w, r)
	}
}

// readyFor answers an owner's request 503 not_ready until the Gate is
// ready; anything else goes to h (which refuses it without the owner
// token).
func (g *Gate) readyFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.ready.Load() && g.sec.identify(r).owner {
			writeError(w, errNotReady)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// debugReader is the viewer's store Reader; a store failure behind any
// read stops the Gate (storeFailed), and the viewer answers unavailable.
type debugReader struct {
	debugview.Reader
	g *Gate
}

func (r debugReader) check(err error) error {
	if err != nil && !errors.Is(err, debugview.ErrNotFound) {
		r.g.storeFailed(err)
	}
	return err
}

func (r debugReader) DebugJobs(ctx context.Context, afterID string, limit int) ([]debugview.Job, error) {
	j, err := r.Reader.DebugJobs(ctx, afterID, limit)
	return j, r.check(err)
}

func (r debugReader) DebugLanes(ctx context.Context, after string, limit int) ([]debugview.Lane, error) {
	l, err := r.Reader.DebugLanes(ctx, after, limit)
	return l, r.check(err)
}

func (r debugReader) DebugJob(ctx context.Context, id string) (debugview.Job, []debugview.Attempt, error) {
	j, a, err := r.Reader.DebugJob(ctx, id)
	return j, a, r.check(err)
}

func (r debugReader) DebugEvents(ctx context.Context, id string, afterSeq int64, limit int) ([]debugview.Event, error) {
	e, err := r.Reader.DebugEvents(ctx, id, afterSeq, limit)
	return e, r.check(err)
}

func (g *Gate) handleReady(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, errMethod)
		return
	}
	if !g.ready.Load() {
		writeError(w, errNotReady)
		return
	}
	if g.isFull() {
		writeError(w, errNotReadyFull)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// handleSubmit validates a task, resolves its policy and persists the job.
func (g *Gate) handleSubmit(w http.ResponseWriter, r *http.Request) {
	// A fresh reading (one statfs) before every submit: between two of the
	// storage loop's readings submits could write more than the floor.
	g.checkSpace()
	if g.isFull() {
		writeError(w, errStorageFull)
		return
	}
	if !jsonBody(r.Header) {
		writeError(w, errMediaType)
		return
	}
	if r.ContentLength > MaxBodyBytes {
		writeError(w, errTooLarge) // declared too large: refused before any of it is read
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, errTooLarge)
		} else {
			writeError(w, errInvalidJSON)
		}
		return
	}
	parsed, err := wire.ParseTask(body)
	if err != nil {
		writeError(w, err)
		return
	}
	nj := store.NewJob{ID: newJobID(), Kind: string(parsed.Kind), Task: parsed.Canonical}
	var plugin string
	release := func() {} // the pins' read lock of a public source's submit, until its job is stored
	if parsed.Kind == wire.KindCoding {
		repo, ok := g.repos[parsed.Coding.RepositoryID]
		if !ok {
			writeError(w, errUnknownRepo)
			return
		}
		if plugin, release, err = g.codingJob(r.Context(), repo, parsed.Coding, &nj); err != nil {
			writeError(w, err)
			return
		}
	} else {
		nj.Pool, nj.Policy, plugin = g.cfg.DefaultPool, g.textPolicy, g.cfg.DefaultExecution.PluginID
	}
	var l *lane
	if g.leasing() {
		l = g.reserveFor(nj.Pool, plugin, nj.RepositoryID)
	}
	if l == nil {
		// No fitting lane is idle: store the job, then wake (a lane may
		// have become idle meanwhile; lanes that are asking ask again now
		// that the job is committed).
		job, err := g.st.Submit(r.Context(), nj, g.now())
		release()
		if err != nil {
			g.storeError(w, err)
			return
		}
		g.wakeFor(nj.Pool, plugin, nj.RepositoryID)
		b, err := jobJSON(job)
		writeEncoded(w, http.StatusCreated, b, err)
		return
	}
	// An idle lane was reserved: the job and that lane's lease share one
	// commit. The response goes out first, then the lease. The Gate's
	// context, not the request's: a client that goes away must not leave a
	// committed lease unsent (the lane would sit out the lease TTL).
	job, ls, leaseErr, err := g.st.SubmitAndLease(g.ctx, nj, l.leaseRequest(), g.now())
	release()
	if err != nil {
		g.giveBack(l, ls, err)
		if g.afterLease(l, nil, nil) {
			g.startLeasing(l)
		}
		g.storeError(w, err)
		return
	}
	b, err := jobJSON(job)
	writeEncoded(w, http.StatusCreated, b, err)
	_ = http.NewResponseController(w).Flush()
	if g.afterLease(l, ls, leaseErr) {
		g.startLeasing(l)
	}
	if ls == nil {
		// The reserved lane took nothing (it went away or was not idle
		// after all): the committed job still needs a lane.
		g.wakeFor(nj.Pool, plugin, nj.RepositoryID)
	}
}

// codingJob fills nj for coding task t of repo and returns the plugin
// its lanes run. A public source is cloned or fetched, and its base
// checked, before any job exists (the error is then a *source.Error);
// release drops the pins' read lock that is held until the job is stored
// (prepareHeld).
func (g *Gate) codingJob(ctx context.Context, repo *RepositoryConfig, t wire.CodingTask, nj *store.NewJob) (plugin string, release func(), err error) {
	prepared, release, err := g.prepareHeld(ctx, repo, t.BaseSHA)
	if err != nil {
		return "", nil, err
	}
	nj.RepositoryID, nj.Pool, nj.Policy = repo.ID, repo.WorkerPool, g.repoPolicy[repo.ID]
	nj.PreparedPath = prepared
	nj.DefaultBranch = repo.DefaultBranch
	nj.BaseSHA = t.BaseSHA
	nj.TestArgCounts = make([]int, len(t.Tests))
	for i, argv := range t.Tests {
		nj.TestArgCounts[i] = len(argv)
	}
	nj.Delivery = g.deliveryTarget(repo)
	return repo.Execution.PluginID, release, nil
}

func (g *Gate) handleJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !ident.ValidRef(id) {
		writeError(w, errNotFound)
		return
	}
	job, err := g.st.Job(r.Context(), id)
	if err != nil {
		g.storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, job)
}

func (g *Gate) handleEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !ident.ValidRef(id) {
		writeError(w, errNotFound)
		return
	}
	events, err := g.st.Events(r.Context(), id)
	if err != nil {
		g.storeError(w, err)
		return
	}
	if events == nil {
		events = []store.Event{}
	}
	writeJSON(w, http.StatusOK, events)
}

func (g *Gate) handleAggregate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !ident.ValidRef(id) {
		writeError(w, errNotFound)
		return
	}
	agg, err := g.st.Aggregate(r.Context(), id)
	if err != nil {
		g.storeError(w, err)
		return
	}
	if agg.Attempts == nil {
		agg.Attempts = []store.Attempt{}
	}
	if agg.Events == nil {
		agg.Events = []store.Event{}
	}
	for i := range agg.Attempts {
		if agg.Attempts[i].Evidence == nil {
			agg.Attempts[i].Evidence = []json.RawMessage{}
		}
	}
	writeJSON(w, http.StatusOK, agg)
}

// storeError answers a failed store call; unexpected failures stop the Gate.
func (g *Gate) storeError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, errNotFound)
	case errors.Is(err, store.ErrInvalid):
		writeError(w, invalidTask("task", "rejected by the store"))
	default:
		g.storeFailed(err)
		if g.fullErr(err) {
			writeError(w, errStorageFull)
			return
		}
		writeError(w, errUnavailable)
	}
}
