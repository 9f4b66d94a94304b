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
	p, err := source.New(g.cfg.PublicRepositoryRoot, g.cfg.GitExecutable, g.log)
	if err != nil {
		return errors.New("gate: public sources: cannot prepare the repository root")
	}
	g.sources = p
	for _, r := range g.repos {
		if r.RepositoryURL != "" {
			r.preparedPath = p.Dir(publicSource(r))
		}
	}
	return nil
}

// closeSources stops running fetches and waits for them.
func (g *Gate) closeSources() {
	if g.sources != nil {
		g.sources.Close()
	}
}

// publicSource describes a public-source repository to the preparer.
func publicSource(r *RepositoryConfig) source.Repository {
	return source.Repository{
		ID: r.ID, URL: r.RepositoryURL, Branch: r.DefaultBranch,
		Timeout: r.Execution.GitTimeout.Std(), OutputBytes: r.Execution.GitOutputBytes,
	}
}

// prepareSource brings a public-source repository up to date for a
// coding submit and checks its base; static registrations pass as they
// are. The error is a *source.Error.
func (g *Gate) prepareSource(ctx context.Context, r *RepositoryConfig, base string) error {
	if r.RepositoryURL == "" {
		return nil
	}
	if g.sources == nil {
		return &source.Error{Phase: source.PhaseClone, Reason: source.ReasonLocalFailure}
	}
	_, err := g.sources.Prepare(ctx, publicSource(r), base)
	return err
}

// leaseSource fills a coding lease of a public-source repository with the
// prepared path and the base the Gate checked.
func leaseSource(r *RepositoryConfig, l *wire.Lease) {
	if r == nil || r.RepositoryURL == "" || l.Kind != wire.KindCoding {
		return
	}
	t, err := wire.DecodeCodingTask(l.Task)
	if err != nil {
		return // the encoder refuses the lease's task anyway
	}
	l.RepositoryPath = r.preparedPath
	l.BaseSHA = t.BaseSHA
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
