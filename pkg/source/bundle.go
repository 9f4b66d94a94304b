package source

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// Bundles cross the Gate/Worker boundary (DECISIONS 15): the base of a
// public-source lease goes out as a bundle of the base minus the commits
// the Worker already has, and the candidate comes back as a bundle whose
// only prerequisite is the base. Both are made and checked in a scratch
// repository under the root (.forge-scratch-*, removed by New): a bare
// repository without template whose objects/info/alternates names the
// prepared repository's objects, so it reads the prepared history and
// writes nothing into it. Only StoreCandidate (candidate.go), after every
// check, writes the prepared repository: a pack of the candidate's objects
// and its ref.

// scratchPrefix names scratch repositories under the root.
const scratchPrefix = ".forge-scratch-"

// baseRef is the one ref a base bundle carries (in the scratch repository
// and in the bundle; never in the prepared repository).
const baseRef = "refs/forge/base"

// BaseRef is the ref a base bundle names its base by.
const BaseRef = baseRef

// BundleError is a refused bundle request or candidate: a fixed reason
// word (never a path, a value or git's output).
type BundleError struct{ Reason string }

func (e *BundleError) Error() string { return "source: bundle: " + e.Reason }

// Bundle refusal reasons.
const (
	ReasonBundleMalformed     = "malformed_bundle"     // header, pack or objects git refuses
	ReasonBundlePrerequisites = "wrong_prerequisites"  // not exactly the base as the one prerequisite
	ReasonBundleRef           = "wrong_ref"            // not exactly the attempt's candidate ref at the announced commit
	ReasonBundleCommits       = "not_one_new_commit"   // more (or fewer) than one commit beyond the base
	ReasonBundleParent        = "wrong_parent"         // the commit's parents are not exactly the base
	ReasonBundleTree          = "wrong_tree"           // the commit's tree is not the announced one
	ReasonBundleIdentity      = "identity_not_allowed" // author or committer not the ones the task allows
	ReasonBundleHeaders       = "unexpected_headers"   // commit headers beyond tree, parent, author, committer
	ReasonBundleRefTaken      = "candidate_ref_taken"  // the candidate ref exists at another commit
	ReasonBundleUnpacked      = "unpacked_too_large"   // the pack's objects, unpacked, past the bounds (candidate.go)
	ReasonBundleFsck          = "fsck_failed"          // an object git's strict fsck refuses (a .git entry, a hostile .gitmodules)
	ReasonBundleObjects       = "wrong_objects"        // the pack's objects are not exactly the candidate's beyond the base
	ReasonBundleMemory        = "memory_exceeded"      // a git checking it needed more than its memory bound (candidate.go)
	ReasonNothingToSend       = "nothing_to_send"      // the base is within what the Worker has
)

// scratch creates a scratch repository reading dir's objects (a
// gitx.Quarantine at r.git) and returns the directory holding it; the
// caller removes it.
func (p *Preparer) scratch(dir string) (string, error) {
	tmp, err := os.MkdirTemp(p.root, scratchPrefix)
	if err != nil {
		return "", &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	if err := gitx.Quarantine(filepath.Join(tmp, "r.git"), dir); err != nil {
		os.RemoveAll(tmp)
		return "", &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	return tmp, nil
}

// Scratch returns a new private directory under the root for a bundle in
// transit (a candidate's upload); the caller removes it.
func (p *Preparer) Scratch() (string, error) {
	d, err := os.MkdirTemp(p.root, scratchPrefix)
	if err != nil {
		return "", &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	return d, nil
}

// BaseBundle writes a bundle of base minus haves from the prepared
// repository dir and returns its path and a cleanup. Only haves that are
// ancestors of base count; any other (unknown, another job's candidate, a
// fork) is ignored, so the answer never depends on, or tells of, objects
// outside the base's history. The bundle's one ref is BaseRef at base,
// so it holds exactly the objects reachable from base and not from the
// remaining haves.
func (p *Preparer) BaseBundle(ctx context.Context, r Repository, dir, base string, haves []string) (string, func(), error) {
	g := p.runner(r)
	tmp, err := p.scratch(dir)
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	repo := filepath.Join(tmp, "r.git")
	known, err := commitsIn(ctx, g, repo, append([]string{base}, haves...))
	if err != nil {
		cleanup()
		return "", nil, err
	}
	if !known[base] {
		cleanup()
		return "", nil, &Error{Phase: PhaseBundle, Reason: ReasonBaseMissing}
	}
	// The scratch repository's one ref, written as a loose ref.
	if err := os.MkdirAll(filepath.Join(repo, "refs", "forge"), 0o700); err != nil {
		cleanup()
		return "", nil, &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	if err := os.WriteFile(filepath.Join(repo, filepath.FromSlash(baseRef)), []byte(base+"\n"), 0o600); err != nil {
		cleanup()
		return "", nil, &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	ancestors, err := ancestorsOf(ctx, g, repo, base, haves, known)
	if err != nil {
		cleanup()
		return "", nil, err
	}
	args := []string{"bundle", "create", "--quiet", filepath.Join(tmp, "base.bundle"), baseRef}
	for _, h := range ancestors {
		args = append(args, "^"+h)
	}
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: args}); err != nil {
		cleanup()
		var ge *gitx.Error
		if errors.As(err, &ge) && ge.OutputContains("empty bundle") {
			return "", nil, &BundleError{Reason: ReasonNothingToSend}
		}
		return "", nil, gitError(PhaseBundle, err)
	}
	return filepath.Join(tmp, "base.bundle"), cleanup, nil
}

// ancestorsOf returns the haves that are commits (known) and ancestors of
// base, in their order: one for-each-ref --merged over loose refs the
// scratch repository repo gets for them.
func ancestorsOf(ctx context.Context, g *gitx.Runner, repo, base string, haves []string, known map[string]bool) ([]string, error) {
	dir := filepath.Join(repo, "refs", "forge", "haves")
	n := 0
	for _, h := range haves {
		if !known[h] {
			continue
		}
		if n == 0 {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, h), []byte(h+"\n"), 0o600); err != nil {
			return nil, &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	out, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"for-each-ref", "--merged=" + base, "--format=%(objectname)", "refs/forge/haves/"}})
	if err != nil {
		return nil, gitError(PhaseBundle, err)
	}
	in := map[string]bool{}
	for _, sha := range strings.Fields(string(out)) {
		in[sha] = true
	}
	var kept []string
	for _, h := range haves {
		if in[h] {
			kept = append(kept, h)
		}
	}
	return kept, nil
}

// commitsIn reports which of shas are commits in repo (one cat-file).
func commitsIn(ctx context.Context, g *gitx.Runner, repo string, shas []string) (map[string]bool, error) {
	var in bytes.Buffer
	for _, s := range shas {
		in.WriteString(s + "\n")
	}
	out, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Stdin: in.Bytes(), Args: []string{"cat-file", "--batch-check=%(objectname) %(objecttype)"}})
	if err != nil {
		return nil, gitError(PhaseBundle, err)
	}
	known := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if sha, ok := strings.CutSuffix(line, " commit"); ok {
			known[sha] = true
		}
	}
	return known, nil
}

// refusedOr maps a git command that exited non-zero to a refusal with
// reason (memory_exceeded when it ran out of its memory bound), anything
// else (a timeout, a local failure) to an *Error.
func refusedOr(err error, reason string) error {
	if gitx.OutOfMemory(err) {
		return &BundleError{Reason: ReasonBundleMemory}
	}
	if _, exited := gitx.ExitCode(err); exited {
		return &BundleError{Reason: reason}
	}
	return gitError(PhaseBundle, err)
}

// CandidateAt returns the commit ref names in the prepared repository
// dir; a missing ref is a *gitx.Error.
func (p *Preparer) CandidateAt(ctx context.Context, r Repository, dir, ref string) (string, error) {
	return p.runner(r).Line(ctx, gitx.Cmd{GitDir: dir, Args: []string{"rev-parse", "--verify", "--quiet", ref + "^{commit}"}})
}
