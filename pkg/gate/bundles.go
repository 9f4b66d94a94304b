package gate

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Public-source repositories cross the Gate/Worker boundary as git
// bundles on the Gate's listener (DECISIONS 15, docs/wire-protocol.md):
// GET wire.SourcePath serves a lease's base, PUT wire.CandidatePath takes
// its candidate. Both take the Worker token and a query naming the lane's
// current lease; anything else is refused with 403 and a log line that
// names the route and a fixed reason, never a token, path or value.

// DefaultCandidateBundleBytes bounds a candidate bundle unless
// candidate_bundle_bytes says otherwise.
const DefaultCandidateBundleBytes = 256 << 20

// candidateUploadTimeout bounds reading one candidate upload (the
// server's read timeout is too short for a large bundle).
const candidateUploadTimeout = 10 * time.Minute

// sourceStallTimeout bounds each write of a base bundle to the Worker: a
// reader that takes no chunk for that long is cut off (and the bundle's
// temporary file removed), however large the bundle.
const sourceStallTimeout = time.Minute

// sourceChunkBytes is what one write of a base bundle carries.
const sourceChunkBytes = 1 << 20

// workerBundles bounds one Worker's bundle requests in flight: reads
// (worker_source_reads base bundles) and uploads (one candidate). A
// request waits for a slot before the Gate does any work for it.
type workerBundles struct{ reads, uploads chan struct{} }

func newBundleSlots(cfg *Config) []workerBundles {
	s := make([]workerBundles, len(cfg.Workers))
	for i := range s {
		s[i] = workerBundles{reads: make(chan struct{}, cfg.workerSourceReads()), uploads: make(chan struct{}, 1)}
	}
	return s
}

// acquire takes a slot of ch, waiting as long as the request does; it
// returns the release, or nil when the request ended first.
func acquire(r *http.Request, ch chan struct{}) func() {
	select {
	case ch <- struct{}{}:
		return func() { <-ch }
	case <-r.Context().Done():
		return nil
	}
}

var (
	errBundleForbidden = &apiError{http.StatusForbidden, "forbidden", "no current public-source lease of this worker matches the request"}
	errCandidateLarge  = &apiError{http.StatusRequestEntityTooLarge, "candidate_too_large", "the candidate bundle exceeds candidate_bundle_bytes"}
	errBundleMedia     = &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", "request body must be application/x-git-bundle"}
	errNothingToSend   = &apiError{http.StatusConflict, "nothing_to_send", "the base is within the commits the worker has"}
)

// codeCandidateRefused is the error of a candidate bundle that failed
// verification; its body names the fixed reason.
const codeCandidateRefused = "candidate_refused"

// bundleLease authenticates a bundle request and checks its binding: a
// Worker token, the method, readiness, and the attempt leased now to the
// named lane (of this Worker) under the named generation, of a
// public-source job. It answers the refusal itself and returns ok=false.
func (g *Gate) bundleLease(w http.ResponseWriter, r *http.Request, method, route string, b wire.AttemptBinding, bindErr error) (store.SourceAttempt, bool) {
	p := g.sec.identify(r)
	if p.worker < 0 {
		writeError(w, errNotAWorker)
		return store.SourceAttempt{}, false
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, errMethod)
		return store.SourceAttempt{}, false
	}
	if !g.ready.Load() {
		writeError(w, errNotReady)
		return store.SourceAttempt{}, false
	}
	if bindErr != nil {
		g.refuseBundle(w, route, p, "malformed_query")
		return store.SourceAttempt{}, false
	}
	f := store.Fence{JobID: b.JobID, AttemptID: b.AttemptID, Lane: b.Lane, Generation: b.Generation}
	sa, err := g.st.SourceAttempt(r.Context(), f, g.cfg.Workers[p.worker].ID, g.now())
	switch {
	case err == nil:
		return sa, true
	case errors.Is(err, store.ErrExpired):
		g.refuseBundle(w, route, p, "lease_expired")
	case errors.Is(err, store.ErrStale), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid):
		g.refuseBundle(w, route, p, "not_current_lease")
	default:
		writeError(w, errUnavailable)
		g.storeFailed(err)
	}
	return store.SourceAttempt{}, false
}

// refuseBundle answers 403 and logs the refusal without secrets.
func (g *Gate) refuseBundle(w http.ResponseWriter, route string, p principal, reason string) {
	g.log.Warn("worker bundle request refused", "route", route, "worker_id", g.cfg.Workers[p.worker].ID, "reason", reason)
	writeError(w, errBundleForbidden)
}

// sourceRepository describes a job's prepared repository to the
// preparer: the configured repository's git bounds when it is still
// configured, gitx defaults otherwise.
func (g *Gate) sourceRepository(id string) source.Repository {
	if r := g.repos[id]; r != nil && r.RepositoryURL != "" {
		return publicSource(r)
	}
	return source.Repository{ID: id}
}

// handleSource serves a public-source lease's base as a bundle.
func (g *Gate) handleSource(w http.ResponseWriter, r *http.Request) {
	req, perr := wire.ParseSourceRequest(r.URL.RawQuery)
	sa, ok := g.bundleLease(w, r, http.MethodGet, "source", req.AttemptBinding, perr)
	if !ok {
		return
	}
	if req.Want != sa.BaseSHA {
		g.refuseBundle(w, "source", g.sec.identify(r), "want_not_base")
		return
	}
	if g.sources == nil {
		writeError(w, errUnavailable)
		return
	}
	release := acquire(r, g.bundleSlots[g.sec.identify(r).worker].reads)
	if release == nil {
		return
	}
	defer release()
	path, cleanup, err := g.sources.BaseBundle(r.Context(), g.sourceRepository(sa.RepositoryID), sa.PreparedPath, sa.BaseSHA, req.Haves)
	if err != nil {
		var be *source.BundleError
		if errors.As(err, &be) && be.Reason == source.ReasonNothingToSend {
			writeError(w, errNothingToSend)
			return
		}
		g.log.Warn("base bundle failed", "repository_id", sa.RepositoryID, "error", err.Error())
		writeError(w, errUnavailable)
		return
	}
	defer cleanup()
	f, err := os.Open(path)
	if err != nil {
		writeError(w, errUnavailable)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeError(w, errUnavailable)
		return
	}
	w.Header().Set("Content-Type", wire.BundleContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	buf := make([]byte, sourceChunkBytes)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(g.sourceStall))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// handleCandidate takes an attempt's candidate bundle: bounded, verified
// in a scratch repository, fenced, then stored under the candidate ref.
func (g *Gate) handleCandidate(w http.ResponseWriter, r *http.Request) {
	req, perr := wire.ParseCandidateRequest(r.URL.RawQuery)
	sa, ok := g.bundleLease(w, r, http.MethodPut, "candidate", req.AttemptBinding, perr)
	if !ok {
		return
	}
	if ct := r.Header.Values("Content-Type"); len(ct) != 1 || ct[0] != wire.BundleContentType {
		writeError(w, errBundleMedia)
		return
	}
	limit := g.cfg.candidateBundleBytes()
	if r.ContentLength > limit {
		writeError(w, errCandidateLarge)
		return
	}
	task, err := wire.DecodeCodingTask(sa.Task)
	if err != nil || g.sources == nil {
		writeError(w, errUnavailable)
		return
	}
	p := g.sec.identify(r)
	release := acquire(r, g.bundleSlots[p.worker].uploads)
	if release == nil {
		return
	}
	defer release()
	tmp, err := g.sources.Scratch()
	if err != nil {
		writeError(w, errUnavailable)
		return
	}
	defer os.RemoveAll(tmp)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(candidateUploadTimeout))
	path := filepath.Join(tmp, "candidate.bundle")
	if err := receiveBundle(path, http.MaxBytesReader(w, r.Body, limit)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, errCandidateLarge)
			return
		}
		writeError(w, &apiError{http.StatusBadRequest, codeCandidateRefused, "the candidate bundle could not be read"})
		return
	}
	author := wire.CommitterName + " <" + wire.CommitterEmail + ">"
	if task.CommitAuthorName != "" {
		author = task.CommitAuthorName + " <" + task.CommitAuthorEmail + ">"
	}
	c := source.Candidate{
		Dir: sa.PreparedPath, Base: sa.BaseSHA, Commit: req.Candidate, Tree: req.Tree,
		Ref: wire.CandidateRef(req.JobID, req.AttemptID), Author: author,
		Committer:      wire.CommitterName + " <" + wire.CommitterEmail + ">",
		UnpackedBytes:  g.cfg.CandidateUnpackedBytes,
		GitMemoryBytes: g.cfg.CandidateGitMemoryBytes,
	}
	// Fencing: the lease is checked again right before anything is
	// stored, so a candidate of an attempt superseded meanwhile stores
	// nothing.
	fenced := func() error {
		f := store.Fence{JobID: req.JobID, AttemptID: req.AttemptID, Lane: req.Lane, Generation: req.Generation}
		_, err := g.st.SourceAttempt(context.WithoutCancel(r.Context()), f, g.cfg.Workers[p.worker].ID, g.now())
		return err
	}
	err = g.sources.StoreCandidate(r.Context(), g.sourceRepository(sa.RepositoryID), c, path, fenced)
	var be *source.BundleError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.As(err, &be):
		g.log.Warn("candidate bundle refused", "repository_id", sa.RepositoryID, "reason", be.Reason)
		var b errorBody
		b.Error.Code, b.Error.Message, b.Error.Reason = codeCandidateRefused, "the candidate bundle failed verification", be.Reason
		writeJSON(w, http.StatusUnprocessableEntity, b)
	case errors.Is(err, store.ErrExpired), errors.Is(err, store.ErrStale), errors.Is(err, store.ErrNotFound):
		g.refuseBundle(w, "candidate", p, "superseded")
	default:
		g.log.Warn("candidate bundle failed", "repository_id", sa.RepositoryID, "error", err.Error())
		writeError(w, errUnavailable)
	}
}

// receiveBundle writes body to a new private file at path.
func receiveBundle(path string, body io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, body)
	return errors.Join(err, f.Close())
}

// candidateStored reports whether a public-source attempt's candidate
// ref in its prepared repository names sha: a success result claims a
// candidate only once the Gate holds it. Static jobs always pass.
func (g *Gate) candidateStored(ctx context.Context, jobID, attemptID, sha string) (bool, error) {
	repo, dir, err := g.st.JobSource(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && dir == "") {
		return true, nil // static, or unknown: the store decides
	}
	if err != nil {
		return false, err
	}
	if g.sources == nil {
		return false, nil
	}
	got, err := g.sources.CandidateAt(ctx, g.sourceRepository(repo), dir, wire.CandidateRef(jobID, attemptID))
	if err != nil {
		var ge *gitx.Error
		if errors.As(err, &ge) {
			return false, nil
		}
		return false, err
	}
	return got == sha, nil
}
