package wire

import (
	"errors"
	"net/url"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Repositories cross the Gate/Worker boundary as git bundles over HTTP on
// the Gate's listener (DECISIONS 15), next to the lane's WebSocket, with
// the same "Authorization: Bearer <worker token>". Each request names the
// lane's current lease in its query: the Gate serves or accepts a bundle
// only for an attempt leased to that lane, under that generation, of a
// Worker holding that token, before its deadline.
const (
	// SourcePath serves a public-source lease's base (GET): a bundle of
	// the base minus the commits the Worker says it has.
	SourcePath = "/v1/worker/source"
	// CandidatePath takes an attempt's candidate (PUT): a bundle whose
	// only prerequisite is the base and whose one ref is the attempt's
	// candidate ref.
	CandidatePath = "/v1/worker/candidate"
	// BundleContentType is both bodies' media type.
	BundleContentType = "application/x-git-bundle"
	// MaxHaves bounds the commits a source request may name.
	MaxHaves = 32
	// MaxBindingQueryBytes bounds either request's query.
	MaxBindingQueryBytes = 4096
)

// AttemptBinding names the lease a bundle request belongs to.
type AttemptBinding struct {
	Lane       string // the welcome's lane name
	Generation string // the welcome's generation
	JobID      string
	AttemptID  string
}

// SourceRequest asks for a lease's base. Want must be the lease's base;
// Haves are commits of the repository the Worker already has (each
// narrows the bundle, none widens it).
type SourceRequest struct {
	AttemptBinding
	Want  string
	Haves []string
}

// CandidateRequest announces an attempt's candidate: the commit and its
// tree, which the bundle must carry exactly.
type CandidateRequest struct {
	AttemptBinding
	Candidate string
	Tree      string
}

var errBindingQuery = errors.New("wire: malformed bundle request query")

// Query encodes r in its one canonical form.
func (r SourceRequest) Query() string {
	q := r.AttemptBinding.query() + "&want=" + r.Want
	for _, h := range r.Haves {
		q += "&have=" + h
	}
	return q
}

// Query encodes r in its one canonical form.
func (r CandidateRequest) Query() string {
	return r.AttemptBinding.query() + "&candidate=" + r.Candidate + "&tree=" + r.Tree
}

func (b AttemptBinding) query() string {
	return "lane=" + url.QueryEscape(b.Lane) + "&generation=" + b.Generation +
		"&job_id=" + url.QueryEscape(b.JobID) + "&attempt_id=" + url.QueryEscape(b.AttemptID)
}

// ParseSourceRequest accepts exactly what Query produces for a valid
// request: the keys in order, each once (have 0..MaxHaves times, distinct,
// never the want), canonical escaping, valid values.
func ParseSourceRequest(raw string) (SourceRequest, error) {
	var r SourceRequest
	kv, err := splitQuery(raw)
	if err != nil || len(kv) < 5 || len(kv) > 5+MaxHaves {
		return SourceRequest{}, errBindingQuery
	}
	if r.AttemptBinding, err = parseBinding(kv); err != nil || kv[4][0] != "want" || !ident.ValidSHA(kv[4][1]) {
		return SourceRequest{}, errBindingQuery
	}
	r.Want = kv[4][1]
	seen := map[string]bool{r.Want: true}
	for _, p := range kv[5:] {
		if p[0] != "have" || !ident.ValidSHA(p[1]) || seen[p[1]] {
			return SourceRequest{}, errBindingQuery
		}
		seen[p[1]] = true
		r.Haves = append(r.Haves, p[1])
	}
	if r.Query() != raw {
		return SourceRequest{}, errBindingQuery
	}
	return r, nil
}

// ParseCandidateRequest accepts exactly what Query produces for a valid
// request.
func ParseCandidateRequest(raw string) (CandidateRequest, error) {
	var r CandidateRequest
	kv, err := splitQuery(raw)
	if err != nil || len(kv) != 6 {
		return CandidateRequest{}, errBindingQuery
	}
	if r.AttemptBinding, err = parseBinding(kv); err != nil || kv[4][0] != "candidate" || kv[5][0] != "tree" ||
		!ident.ValidSHA(kv[4][1]) || !ident.ValidSHA(kv[5][1]) {
		return CandidateRequest{}, errBindingQuery
	}
	r.Candidate, r.Tree = kv[4][1], kv[5][1]
	if r.Query() != raw {
		return CandidateRequest{}, errBindingQuery
	}
	return r, nil
}

// splitQuery splits a bounded query into unescaped key/value pairs.
func splitQuery(raw string) ([][2]string, error) {
	if raw == "" || len(raw) > MaxBindingQueryBytes {
		return nil, errBindingQuery
	}
	parts := strings.Split(raw, "&")
	if len(parts) > 5+MaxHaves {
		return nil, errBindingQuery
	}
	kv := make([][2]string, 0, len(parts))
	for _, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, errBindingQuery
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, errBindingQuery
		}
		kv = append(kv, [2]string{k, val})
	}
	return kv, nil
}

func parseBinding(kv [][2]string) (AttemptBinding, error) {
	if kv[0][0] != "lane" || kv[1][0] != "generation" || kv[2][0] != "job_id" || kv[3][0] != "attempt_id" ||
		!ident.ValidLane(kv[0][1]) || !ident.ValidHexID(kv[1][1]) || !ident.ValidRef(kv[2][1]) || !ident.ValidRef(kv[3][1]) {
		return AttemptBinding{}, errBindingQuery
	}
	return AttemptBinding{Lane: kv[0][1], Generation: kv[1][1], JobID: kv[2][1], AttemptID: kv[3][1]}, nil
}

// The committer of every candidate commit, and its author when the task
// names none. The Gate refuses a candidate bundle whose commit says
// otherwise.
const (
	CommitterName  = "Agent Forge"
	CommitterEmail = "forge@example.invalid"
)

// CandidateRef is the deterministic ref of an attempt's candidate.
func CandidateRef(jobID, attemptID string) string {
	return ident.CandidateRefPrefix + jobID + "/" + attemptID
}
