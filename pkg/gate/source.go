package gate

import (
	"context"
	"errors"
	"net/http"

	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// openSources builds the public-source preparer when some repository has
// a repository_url (nil otherwise).
func (g *Gate) openSources() error {
	if !g.cfg.hasPublicSources() {
		return nil
	}
	p, err := source.New(g.cfg.PublicRepositoryRoot, g.cfg.GitExecutable, g.log, g.reaper)
	if err != nil {
		return errors.New("gate: public sources: cannot prepare the repository root")
	}
	g.sources = p
	return nil
}

// closeSources stops running fetches and waits for them.
func (g *Gate) closeSources() {
	if g.sources != nil {
		g.sources.Close()
	}
}

// preparedDir is the bare repository a public-source repository is
// prepared in under the current configuration ("" for a static one).
func (g *Gate) preparedDir(r *RepositoryConfig) string {
	if r.RepositoryURL == "" || g.sources == nil {
		return ""
	}
	return g.sources.Dir(publicSource(r))
}

// publicSource describes a public-source repository to the preparer.
func publicSource(r *RepositoryConfig) source.Repository {
	return source.Repository{
		ID: r.ID, URL: r.RepositoryURL, Branch: r.DefaultBranch,
		Timeout: r.Execution.GitTimeout.Std(), OutputBytes: r.Execution.GitOutputBytes,
	}
}

// prepareSource brings a public-source repository up to date for a
// coding submit, checks its base and returns the prepared repository's
// path, which the job keeps; static registrations pass with "". The error
// is a *source.Error.
func (g *Gate) prepareSource(ctx context.Context, r *RepositoryConfig, base string) (string, error) {
	if r.RepositoryURL == "" {
		return "", nil
	}
	if g.sources == nil {
		return "", &source.Error{Phase: source.PhaseClone, Reason: source.ReasonLocalFailure}
	}
	return g.sources.Prepare(ctx, publicSource(r), base)
}

// maxPrepareRounds bounds how often a submit checks its base again
// because maintenance updated the pins meanwhile (one in an hour, see
// maintain.go).
const maxPrepareRounds = 3

// prepareHeld is prepareSource for a submit that stores its job next. It
// returns with the pins' read lock held, release dropping it (call it
// once the job is stored, or not), and only when no pin update ran since
// before the base was checked; otherwise it checks again (basePins,
// maintain.go). Static registrations pass with "" and nothing held.
func (g *Gate) prepareHeld(ctx context.Context, r *RepositoryConfig, base string) (string, func(), error) {
	return g.holdPrepared(r, func() (string, error) { return g.prepareSource(ctx, r, base) })
}

// holdPrepared runs prepare (a check of a public source's base) under
// prepareHeld's rule.
func (g *Gate) holdPrepared(r *RepositoryConfig, prepare func() (string, error)) (string, func(), error) {
	if r.RepositoryURL == "" {
		return "", func() {}, nil
	}
	for range maxPrepareRounds {
		g.pins.mu.RLock()
		gen := g.pins.gen
		g.pins.mu.RUnlock()
		prepared, err := prepare()
		if err != nil {
			return "", nil, err
		}
		g.pins.mu.RLock()
		if g.pins.gen == gen {
			return prepared, g.pins.mu.RUnlock, nil
		}
		g.pins.mu.RUnlock()
	}
	return "", nil, &source.Error{Phase: source.PhaseBase, Reason: source.ReasonCancelled, Retryable: true}
}

// leaseSource marks a coding lease of a job prepared at submit with the
// base the Gate checked there (the job's base_sha); the path stays in the
// Gate, which serves the base to the lane (bundles.go).
func leaseSource(prepared, base string, l *wire.Lease) {
	if prepared == "" || l.Kind != wire.KindCoding {
		return
	}
	l.BaseSHA = base
}

// codeSourceFailed is the API error of a failed preparation; its body
// also carries the phase, reason and retryable of the *source.Error.
const codeSourceFailed = "source_failed"

// sourceAPIError maps a preparation failure to the owner API's
// source_failed error: 422 when the request's base is at fault, 503 when
// a later attempt may succeed, 502 otherwise.
func sourceAPIError(e *source.Error) *apiError {
	status, msg := http.StatusBadGateway, "the public source could not be prepared"
	switch {
	case e.Phase == source.PhaseBase && !e.Retryable:
		status, msg = http.StatusUnprocessableEntity, "base_sha is not usable on the repository's default branch"
	case e.Retryable:
		status, msg = http.StatusServiceUnavailable, "the public source could not be prepared now; retry later"
	}
	return &apiError{status, codeSourceFailed, msg}
}
