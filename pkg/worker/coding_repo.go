package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// repoPaths locates a registered repository's Git directories.
type repoPaths struct {
	path   string // the configured (canonical) repository path
	common string // the common git dir: <path>/.git or <path> when bare
}

// prepare runs the preparation phase. It fails with a record and a code.
func (j *codingJob) prepare(ctx context.Context) (outcome, bool) {
	const P = evidence.PhasePreparation
	task, err := wire.DecodeCodingTask(j.lease.Task)
	if err != nil {
		return j.fail(P, evidence.ReasonInvalidTask, CodeInvalidTask), false
	}
	j.task = task
	inv, code := j.x.cfg.prepare(j.lease.Policy, j.x.opt.LookupEnv, j.attempt.metered())
	if code != "" {
		reason := evidence.ReasonPolicyRejected
		if code == CodeInvalidPolicy {
			reason = evidence.ReasonInvalidPolicy
		}
		return j.fail(P, reason, code), false
	}
	if j.attempt != nil {
		inv.useGateway(j.attempt.Grant)
	}
	j.inv = inv
	if code := inv.useEgress(); code != "" {
		return j.fail(P, evidence.ReasonPolicyRejected, code), false
	}
	cfg := j.x.cfg
	i := slices.IndexFunc(cfg.Repositories, func(r Repository) bool { return r.ID == task.RepositoryID })
	if len(cfg.RepositoryRoots) == 0 && (i < 0 || !cfg.Repositories[i].Gate) {
		return j.fail(P, evidence.ReasonNoRepositoryRoots, codeCodingTerminal), false
	}
	if i < 0 {
		return j.fail(P, evidence.ReasonUnknownRepository, codeCodingTerminal), false
	}
	if j.x.outOfService(task.RepositoryID) {
		// An earlier attempt's changes to the shared repository could not
		// be undone; an operator must repair it and restart the Worker.
		return outOfService(j.fail(P, evidence.ReasonGitFailed, codeCodingTerminal)), false
	}
	if j.lease.BaseSHA != "" && j.lease.BaseSHA != task.BaseSHA {
		return j.fail(P, evidence.ReasonInvalidTask, CodeInvalidTask), false
	}
	reg := cfg.Repositories[i]
	// A public-source lease (it carries the base) fits a Gate registration
	// only, and a static lease a static one.
	if reg.Gate != (j.lease.BaseSHA != "") {
		return j.fail(P, evidence.ReasonRepositoryPathDrift, codeCodingTerminal), false
	}
	var rp repoPaths
	if !reg.Gate {
		var ok bool
		if rp, ok = locateRepo(cfg, reg.Path); !ok {
			return j.fail(P, evidence.ReasonRepositoryPathDrift, codeCodingTerminal), false
		}
	}
	j.repo = rp
	home, err := os.MkdirTemp(cfg.RuntimeRoot, "git-")
	if err != nil {
		return j.fail(P, evidence.ReasonWorktreeFailed, codeCodingRetryable), false
	}
	j.gitHome = home
	j.git = &gitx.Runner{
		Git: j.x.opt.Git, Home: home,
		Timeout: inv.exec.GitTimeout.Std(), OutputBytes: inv.exec.GitOutputBytes,
		KillGrace: inv.exec.CleanupTimeout.Std(),
	}
	if reg.Gate {
		return j.prepareGate(ctx)
	}
	head, err := j.git.Line(ctx, gitx.Cmd{GitDir: rp.common, Args: []string{"symbolic-ref", "-q", "HEAD"}})
	if err != nil {
		if _, exited := gitx.ExitCode(err); exited {
			return j.fail(P, evidence.ReasonDefaultBranchMismatch, codeCodingTerminal), false
		}
		return j.fail(P, evidence.ReasonGitFailed, codeCodingRetryable), false
	}
	branch, ok := strings.CutPrefix(head, "refs/heads/")
	if !ok || branch == "" {
		return j.fail(P, evidence.ReasonDefaultBranchMismatch, codeCodingTerminal), false
	}
	if want := leaseDefaultBranch(j.lease); want != "" && want != branch {
		return j.fail(P, evidence.ReasonDefaultBranchMismatch, codeCodingTerminal), false
	}
	j.branch = branch
	if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: rp.common, Args: []string{"cat-file", "-e", task.BaseSHA + "^{commit}"}}); err != nil {
		if _, exited := gitx.ExitCode(err); exited {
			return j.fail(P, evidence.ReasonBaseMissing, codeCodingTerminal), false
		}
		return j.fail(P, evidence.ReasonGitFailed, codeCodingRetryable), false
	}
	if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: rp.common, Args: []string{"merge-base", "--is-ancestor", task.BaseSHA, "refs/heads/" + branch}}); err != nil {
		if code, exited := gitx.ExitCode(err); exited && code == 1 {
			return j.fail(P, evidence.ReasonBaseNotOnDefaultBranch, codeCodingTerminal), false
		}
		return j.fail(P, evidence.ReasonGitFailed, codeCodingRetryable), false
	}
	if !j.addWorktree(ctx) {
		return j.fail(P, evidence.ReasonWorktreeFailed, codeCodingRetryable), false
	}
	return outcome{}, true
}

// leaseDefaultBranch is the default branch Gate names for the repository,
// or "" when the lease does not carry one. The Worker's own notion is the
// repository's HEAD branch; when Gate names one they must agree.
func leaseDefaultBranch(l *wire.Lease) string { return l.DefaultBranch }

// prepareGate prepares an attempt on a Gate registration: the base into
// the Worker's source cache (fetched from the Gate when it is not there),
// then the attempt's own repository (coding_attempt.go). The Gate checked
// the base against the default branch at submit.
func (j *codingJob) prepareGate(ctx context.Context) (outcome, bool) {
	const P = evidence.PhasePreparation
	j.gate = true
	cache, err := j.ensureBase(ctx)
	if err != nil {
		return j.fail(P, evidence.ReasonGitFailed, codeCodingRetryable), false
	}
	if err := j.addAttemptRepo(ctx, cache); err != nil {
		return j.fail(P, evidence.ReasonWorktreeFailed, codeCodingRetryable), false
	}
	return outcome{}, true
}

// locateRepo requires the configured path to be canonical now (no symlink
// drift since startup), inside a canonical repository root, and a Git
// repository (non-bare with a .git directory, or bare).
func locateRepo(cfg *Config, path string) (repoPaths, bool) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil || real != path {
		return repoPaths{}, false
	}
	inRoot := false
	for _, root := range cfg.RepositoryRoots {
		r, err := filepath.EvalSymlinks(root)
		if err == nil && r == root && strings.HasPrefix(path, root+string(filepath.Separator)) {
			inRoot = true
		}
	}
	if !inRoot {
		return repoPaths{}, false
	}
	if fi, err := os.Lstat(filepath.Join(path, ".git")); err == nil && fi.IsDir() {
		return repoPaths{path: path, common: filepath.Join(path, ".git")}, true
	}
	if fi, err := os.Lstat(filepath.Join(path, "objects")); err == nil && fi.IsDir() {
		if fi, err := os.Lstat(filepath.Join(path, "HEAD")); err == nil && fi.Mode().IsRegular() {
			return repoPaths{path: path, common: path}, true
		}
	}
	return repoPaths{}, false
}

// addWorktree creates the private container and the detached worktree,
// finds the worktree's administrative directory and saves the private
// index the Worker stages with.
func (j *codingJob) addWorktree(ctx context.Context) bool {
	c, err := os.MkdirTemp(j.x.cfg.WorktreeRoot, "wt-")
	if err != nil {
		return false
	}
	j.container = c
	if err := os.Chmod(c, 0o700); err != nil {
		return false
	}
	wt := filepath.Join(c, "tree")
	lock := j.x.worktreeLock(j.task.RepositoryID)
	lock.Lock()
	_, err = j.git.Run(ctx, gitx.Cmd{GitDir: j.repo.common, Env: stagingConfigEnv(),
		Args: []string{"worktree", "add", "--detach", wt, j.task.BaseSHA}})
	lock.Unlock()
	if err != nil {
		return false
	}
	j.wt = wt
	admin, ok := worktreeAdmin(wt, j.repo.common)
	if !ok {
		return false
	}
	j.admin = admin
	if j.initStage(ctx, "") != nil {
		return false
	}
	// The plugin may rewrite the worktree's index; staging uses a
	// private copy taken now (coding_index.go).
	return j.savePrivateIndex() == nil
}

// worktreeAdmin reads the worktree's .git file and requires it to point
// into <common>/worktrees/.
func worktreeAdmin(wt, common string) (string, bool) {
	b, err := readAttemptFile(filepath.Join(wt, ".git"), maxGitFile)
	if err != nil {
		return "", false
	}
	line, ok := strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), "gitdir: ")
	if !ok || !filepath.IsAbs(line) || filepath.Clean(line) != line {
		return "", false
	}
	if filepath.Dir(line) != filepath.Join(common, "worktrees") {
		return "", false
	}
	return line, true
}

// removeWorktree removes the worktree and its administrative entry. It is
// idempotent: a worktree already gone is success. No git runs over what
// the agent shaped (git worktree remove and prune follow paths the agent
// can swap for symbolic links): both directories are removed beneath
// their parents (the container, <common>/worktrees: neither writable by a
// sandboxed agent) through descriptors (removeTree), which is all prune
// would do for the entry.
func (j *codingJob) removeWorktree() error {
	if j.wt == "" || j.gate {
		return nil // an attempt repository goes with its container
	}
	lock := j.x.worktreeLock(j.task.RepositoryID)
	lock.Lock()
	defer lock.Unlock()
	if err := removeTree(j.wt); err != nil {
		return err
	}
	if j.admin != "" {
		return removeTree(j.admin)
	}
	return nil
}

// gitState is what the plugin must not change: refs (except candidate
// refs this Worker creates meanwhile for concurrent attempts), Git
// config, hooks, alternates and the worktree's own Git metadata.
type gitState struct {
	refs   []byte
	config string
	meta   string
}

// snapshot reads the state validation compares. Every ref is listed,
// candidate refs included, except the candidate refs the Worker created
// while the baseline is held, as long as they still name the commit they
// were created with: those may appear between two snapshots. One of
// them that is gone is listed as missing (one moved is listed with its
// new value), so deleting or moving it is a change. The listing and the
// created set are read under the lock candidate creation holds.
func (j *codingJob) snapshot(ctx context.Context) (gitState, error) {
	if j.gate {
		// The attempt's own repository: no git reads what its agent
		// writes; its refs are digested as files (a pack-refs shows too).
		refs, err := digestRefs(j.repo.common)
		if err != nil {
			return gitState{}, err
		}
		s, err := j.fileState()
		s.refs = []byte(refs)
		return s, err
	}
	g := j.x.repoGuardOf(j.task.RepositoryID)
	g.refs.Lock()
	out, err := j.git.Run(ctx, gitx.Cmd{GitDir: j.repo.common, Args: []string{"for-each-ref", "--format=%(objectname) %(refname)"}})
	created := j.x.createdRefs(g)
	g.refs.Unlock()
	if err != nil {
		return gitState{}, err
	}
	var refs bytes.Buffer
	seen := map[string]bool{}
	for _, line := range bytes.SplitAfter(out, []byte("\n")) {
		if oid, name, ok := strings.Cut(strings.TrimSuffix(string(line), "\n"), " "); ok {
			if sha, ok := created[name]; ok {
				seen[name] = true
				if sha == oid {
					continue
				}
			}
		}
		refs.Write(line)
	}
	for _, name := range slices.Sorted(maps.Keys(created)) {
		if !seen[name] {
			refs.WriteString("missing " + name + "\n")
		}
	}
	s, err := j.fileState()
	s.refs = refs.Bytes()
	return s, err
}

// fileState digests the git files snapshot compares, in Go through
// descriptors (no git runs): validation compares them before any git
// reads them.
func (j *codingJob) fileState() (gitState, error) {
	c := j.repo.common
	config, err := digestFiles(c, sharedFiles[:]...)
	if err != nil {
		return gitState{}, err
	}
	hooks, err := digestDir(filepath.Join(c, "hooks"))
	if err != nil {
		return gitState{}, err
	}
	meta, err := digestFiles(j.admin, "HEAD", "commondir", "gitdir", "config.worktree", "locked")
	if err != nil {
		return gitState{}, err
	}
	dotgit, err := digestFiles(j.wt, ".git")
	if err != nil {
		return gitState{}, err
	}
	return gitState{config: config + hooks, meta: meta + dotgit}, nil
}

// digestFiles hashes the named files under dir (hashBeneath: absent
// files hash as absent, anything but a regular file by its type, a file
// over maxMetaFile as oversized). An absent or symlinked dir hashes as
// such.
func digestFiles(dir string, names ...string) (string, error) {
	h := sha256.New()
	d, err := openDirNoFollow(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errSymlink), errors.Is(err, errNotDirectory):
		h.Write([]byte("dir\x00" + err.Error() + "\x00"))
		return hex.EncodeToString(h.Sum(nil)), nil
	case err != nil:
		return "", err
	}
	defer d.Close()
	for _, n := range names {
		if err := hashBeneath(h, d, n, maxMetaFile); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// digestRefs hashes a git directory's refs as files: packed-refs and
// every non-directory under refs/ (paths, types, contents; hashBeneath),
// through descriptors, at most maxDigestEntries of them (more hash as too
// many).
func digestRefs(gitDir string) (string, error) {
	d, err := openDirNoFollow(gitDir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	h := sha256.New()
	if err := hashBeneath(h, d, "packed-refs", maxMetaFile); err != nil {
		return "", err
	}
	n := 0
	var walk func(dir *os.File, rel string, depth int) error
	walk = func(dir *os.File, rel string, depth int) error {
		if depth > maxStageDepth {
			return errTreeShape
		}
		names, err := dir.Readdirnames(maxDigestEntries + 1)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		slices.Sort(names)
		for _, name := range names {
			if n++; n > maxDigestEntries {
				return errTreeShape
			}
			p := rel + "/" + name
			if sub, err := openDirAt(dir, name); err == nil {
				// Directories are not hashed as such: git leaves empty
				// ones behind when it deletes a ref.
				err = walk(sub, p, depth+1)
				sub.Close()
				if err != nil {
					return err
				}
				continue
			}
			if err := hashBeneath(h, dir, name, maxMetaFile); err != nil {
				return err
			}
			h.Write([]byte(p + "\x00"))
		}
		return nil
	}
	refs, err := openDirAt(d, "refs")
	switch {
	case err == nil:
		err = walk(refs, "refs", 0)
		refs.Close()
		if errors.Is(err, errTreeShape) {
			h.Write([]byte("too many or too deep refs\x00"))
		} else if err != nil {
			return "", err
		}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errSymlink), errors.Is(err, errNotDirectory):
		h.Write([]byte("refs\x00" + err.Error() + "\x00"))
	default:
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// maxDigestEntries bounds the entries of a directory digestDir hashes one
// by one; a larger directory hashes as too large.
const maxDigestEntries = 4096

// digestDir hashes the entries of a directory (names, then each as
// digestFiles does); an absent directory hashes as absent, a symbolic
// link or a file in its place by its type.
func digestDir(dir string) (string, error) {
	d, err := openDirNoFollow(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "absent", nil
	case errors.Is(err, errSymlink), errors.Is(err, errNotDirectory):
		return err.Error(), nil
	case err != nil:
		return "", err
	}
	defer d.Close()
	names, err := d.Readdirnames(maxDigestEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if len(names) > maxDigestEntries {
		return "too many entries", nil
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		if err := hashBeneath(h, d, n, maxMetaFile); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
