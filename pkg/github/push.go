package github

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/secretscan"
)

// Push failures callers branch on.
var (
	// ErrBranchConflict: the branch exists on GitHub at another commit.
	ErrBranchConflict = errors.New("github: the branch already exists at another commit")
	// ErrWorkflowsRefused: GitHub refused a workflow change without the
	// workflows permission.
	ErrWorkflowsRefused = errors.New("github: push refused: workflow changes need the workflows permission")
	// ErrPushRejected: GitHub's pre-receive checks refused the push
	// (branch protection, a ruleset); repeating it cannot help.
	ErrPushRejected = errors.New("github: push rejected by the repository's rules")
	// ErrPushFailed: any other push or ls-remote failure.
	ErrPushFailed = errors.New("github: push failed")
	// ErrMirror: the private copy could not be made or does not match.
	ErrMirror = errors.New("github: the private copy of the candidate could not be made or verified")
)

// workflowsRefusal is the fixed part of GitHub's refusal text.
const workflowsRefusal = "without `workflows` permission"

// Commit is what a commit object says about its tree and parents.
type Commit struct {
	Tree    string
	Parents []string
}

// ReadCommit reads the commit sha in gitDir (tree and parents only).
func ReadCommit(ctx context.Context, r *gitx.Runner, gitDir, sha string) (Commit, error) {
	if !ident.ValidSHA(sha) {
		return Commit{}, ErrMirror
	}
	out, err := r.Run(ctx, gitx.Cmd{GitDir: gitDir, Args: []string{"cat-file", "commit", sha}})
	if err != nil {
		return Commit{}, err
	}
	return ParseCommit(out)
}

// ParseCommit reads the tree and parents from a raw commit object (the
// output of git cat-file commit): exactly one tree line, any number of
// parent lines, all full SHAs, in the header before the first blank line.
func ParseCommit(out []byte) (Commit, error) {
	head, _, _ := bytes.Cut(out, []byte("\n\n"))
	var c Commit
	for _, line := range strings.Split(string(head), "\n") {
		switch k, v, _ := strings.Cut(line, " "); k {
		case "tree":
			if c.Tree != "" || !ident.ValidSHA(v) {
				return Commit{}, ErrMirror
			}
			c.Tree = v
		case "parent":
			if !ident.ValidSHA(v) {
				return Commit{}, ErrMirror
			}
			c.Parents = append(c.Parents, v)
		}
	}
	if c.Tree == "" {
		return Commit{}, ErrMirror
	}
	return c, nil
}

// ResolveRef returns the object the full ref name ref points to in
// gitDir, and false when it does not exist.
func ResolveRef(ctx context.Context, r *gitx.Runner, gitDir, ref string) (string, bool, error) {
	out, err := r.Line(ctx, gitx.Cmd{GitDir: gitDir, Args: []string{"for-each-ref", "--format=%(objectname) %(refname)", "--", ref}})
	if err != nil {
		return "", false, err
	}
	// A pattern also matches refs below it ("refs/heads/a" matches
	// "refs/heads/a/b"); only an exact name counts.
	for _, line := range strings.Split(out, "\n") {
		sha, name, _ := strings.Cut(line, " ")
		if name == ref {
			if !ident.ValidSHA(sha) {
				return "", false, ErrMirror
			}
			return sha, true, nil
		}
	}
	return "", false, nil
}

// Mirror is a fresh private bare repository holding only what is to be
// published. Credentialed git commands run only here.
type Mirror struct {
	Dir string // the bare repository
	git *gitx.Runner
}

// NewMirror creates the bare repository dir (which must not exist) with
// runner r, whose Home must be private.
func NewMirror(ctx context.Context, r *gitx.Runner, dir string) (*Mirror, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, ErrMirror
	}
	if _, err := r.Run(ctx, gitx.Cmd{Args: []string{"init", "--bare", "--quiet", "--", dir}}); err != nil {
		return nil, ErrMirror
	}
	return &Mirror{Dir: dir, git: r}, nil
}

// Copy fetches exactly the given refs (full names) from the local
// repository at gitDir into the same names in the mirror, with no tags
// and nothing else.
func (m *Mirror) Copy(ctx context.Context, gitDir string, refs ...string) error {
	abs, err := filepath.Abs(gitDir)
	if err != nil {
		return ErrMirror
	}
	args := []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--", "file://" + abs}
	for _, ref := range refs {
		if !strings.HasPrefix(ref, "refs/") {
			return ErrMirror
		}
		args = append(args, ref+":"+ref)
	}
	_, err = m.git.Run(ctx, gitx.Cmd{GitDir: m.Dir, Env: configEnv("protocol.file.allow", "always"), Args: args})
	if err != nil {
		return ErrMirror
	}
	return nil
}

// credentialed runs one git command of the mirror with the token t:
// git's only credential helper reads it from a private FIFO
// (serveCredential), so the token is in no argv, environment or file of
// git or its helpers (/proc/<pid>/environ and cmdline hold only the FIFO's
// path). HTTPS is allowed for this command only, without redirects (which
// could carry the credential elsewhere).
func (m *Mirror) credentialed(ctx context.Context, t *Token, c gitx.Cmd) ([]byte, error) {
	cs, err := serveCredential(m.Dir, []byte("username=x-access-token\npassword="+t.value+"\n"))
	if err != nil {
		return nil, ErrPushFailed
	}
	defer cs.Close()
	c.GitDir, c.HTTPS, c.CredentialHelper = m.Dir, true, credentialHelper(cs.path)
	return m.git.Run(ctx, c)
}

// credentialHelper is the shell helper that answers git's "get" with
// what the FIFO at path serves, and ignores "store" and "erase".
func credentialHelper(path string) string {
	return `!f() { if test "$1" = get; then cat '` + strings.ReplaceAll(path, "'", `'\''`) + `'; fi; }; f`
}

// configEnv builds GIT_CONFIG_COUNT/KEY/VALUE entries from key, value pairs.
func configEnv(kv ...string) []string {
	n := len(kv) / 2
	env := []string{"GIT_CONFIG_COUNT=" + strconv.Itoa(n)}
	for i := 0; i < n; i++ {
		s := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+s+"="+kv[2*i], "GIT_CONFIG_VALUE_"+s+"="+kv[2*i+1])
	}
	return env
}

// RemoteBranch returns the commit branch points to on GitHub, and false
// when it does not exist.
func (m *Mirror) RemoteBranch(ctx context.Context, t *Token, owner, repo, branch string) (string, bool, error) {
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) || !SafeBranch(branch) || t == nil {
		return "", false, ErrPushFailed
	}
	ref := "refs/heads/" + branch
	out, err := m.credentialed(ctx, t, gitx.Cmd{Args: []string{"ls-remote", "--refs", "--", RemoteURL(owner, repo), ref}})
	if err != nil {
		return "", false, ErrPushFailed
	}
	return parseRemoteBranch(out, ref)
}

// parseRemoteBranch reads git ls-remote output for the full ref name ref.
// git matches a pattern against the tail of every ref, so other legal
// refs (refs/heads/x/refs/heads/<branch>) may be listed too: only the
// line naming exactly ref counts, and it may appear at most once.
func parseRemoteBranch(out []byte, ref string) (string, bool, error) {
	found := ""
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		sha, name, ok := strings.Cut(line, "\t")
		if !ok || !ident.ValidSHA(sha) {
			return "", false, ErrPushFailed
		}
		if name != ref {
			continue
		}
		if found != "" {
			return "", false, ErrPushFailed
		}
		found = sha
	}
	return found, found != "", nil
}

// PushNew creates branch on GitHub at sha with a lease that requires the
// branch to be absent, so a concurrent creation is never overwritten. It
// pushes with protocol v2 and push.negotiate, so that the commits the
// mirror shares with GitHub (the base branch Copy brought along) are
// found even when GitHub's branches moved past them, and only what is
// new is sent. A refusal by GitHub's pre-receive checks (branch
// protection, a ruleset: "[remote rejected] … (… declined)", GH006,
// GH013) is ErrPushRejected; the workflows refusal ErrWorkflowsRefused.
func (m *Mirror) PushNew(ctx context.Context, t *Token, owner, repo, branch, sha string) error {
	return m.push(ctx, t, owner, repo, branch, sha, "")
}

// PushOver moves branch on GitHub from exactly the commit over to sha,
// a fast-forward (over is sha's parent): with a lease that requires the
// branch to be at over and without force, so a branch that moved
// meanwhile (someone pushed) is never overwritten: ErrBranchConflict.
// Refusals are classified as for PushNew.
func (m *Mirror) PushOver(ctx context.Context, t *Token, owner, repo, branch, over, sha string) error {
	if !ident.ValidSHA(over) {
		return ErrPushFailed
	}
	return m.push(ctx, t, owner, repo, branch, sha, over)
}

// push pushes sha to branch with a lease on the branch being at expect
// ("": absent).
func (m *Mirror) push(ctx context.Context, t *Token, owner, repo, branch, sha, expect string) error {
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) || !SafeBranch(branch) || !ident.ValidSHA(sha) || t == nil {
		return ErrPushFailed
	}
	ref := "refs/heads/" + branch
	_, err := m.credentialed(ctx, t, gitx.Cmd{Env: configEnv("protocol.version", "2", "push.negotiate", "true"),
		Args: []string{"push", "--porcelain", "--quiet", "--no-verify", "--no-follow-tags",
			"--force-with-lease=" + ref + ":" + expect, "--", RemoteURL(owner, repo), sha + ":" + ref}})
	if err == nil {
		return nil
	}
	return pushRefusal(err)
}

// pushRefusal classifies a failed push by git's fixed words.
func pushRefusal(err error) error {
	var ge *gitx.Error
	if !errors.As(err, &ge) {
		return ErrPushFailed
	}
	switch {
	case ge.OutputContains(workflowsRefusal):
		return ErrWorkflowsRefused
	case ge.OutputContains("stale info") || ge.OutputContains("[rejected]"):
		return ErrBranchConflict
	case ge.OutputContains("[remote rejected]") || ge.OutputContains("hook declined") ||
		ge.OutputContains("GH006") || ge.OutputContains("GH013"):
		return ErrPushRejected
	}
	return ErrPushFailed
}

// Fetch copies the branch of owner/repo on GitHub into the mirror as
// refs/remotes/github/<branch> and returns its commit (false when GitHub
// has no such branch).
func (m *Mirror) Fetch(ctx context.Context, t *Token, owner, repo, branch string) (string, bool, error) {
	if _, ok, err := m.RemoteBranch(ctx, t, owner, repo, branch); err != nil || !ok {
		return "", false, err
	}
	dst := "refs/remotes/github/" + branch
	if _, err := m.credentialed(ctx, t, gitx.Cmd{Env: configEnv("protocol.version", "2"),
		Args: []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
			"--", RemoteURL(owner, repo), "+refs/heads/" + branch + ":" + dst}}); err != nil {
		return "", false, ErrPushFailed
	}
	got, ok, err := ResolveRef(ctx, m.git, m.Dir, dst)
	if err != nil || !ok {
		return "", false, ErrMirror
	}
	// The branch may have moved between the two reads: what was fetched
	// is what counts.
	return got, true, nil
}

// IsAncestor reports whether commit a is an ancestor of (or equal to) b
// in the mirror.
func (m *Mirror) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	if !ident.ValidSHA(a) || !ident.ValidSHA(b) {
		return false, ErrMirror
	}
	_, err := m.git.Run(ctx, gitx.Cmd{GitDir: m.Dir, Args: []string{"merge-base", "--is-ancestor", a, b}})
	if err == nil {
		return true, nil
	}
	if code, ok := gitx.ExitCode(err); ok && code == 1 {
		return false, nil
	}
	return false, ErrMirror
}

// WorkflowsChanged reports whether commit sha of the repository gitDir
// changes anything under .github/workflows against its parent. git is
// asked only about that directory (exit status, no listing), so a commit
// touching many paths never meets the output bound.
func WorkflowsChanged(ctx context.Context, r *gitx.Runner, gitDir, from, to string) (bool, error) {
	if !ident.ValidSHA(from) || !ident.ValidSHA(to) {
		return false, ErrMirror
	}
	_, err := r.Run(ctx, gitx.Cmd{GitDir: gitDir, Args: []string{"diff-tree", "--quiet", "-r", "--no-renames", "--no-ext-diff",
		from, to, "--", ":(literal)" + WorkflowsDir}})
	if err == nil {
		return false, nil
	}
	if code, ok := gitx.ExitCode(err); ok && code == 1 {
		return true, nil
	}
	return false, ErrMirror
}

// FindSecret scans commit sha of the repository gitDir (its message and
// identities) and what it adds to parent (every changed path, every added
// or modified blob: gitx.FindSecret) for the values of sets. It returns
// found and the path of the first file holding one ("" when the commit
// object or a path itself does).
func FindSecret(ctx context.Context, r *gitx.Runner, gitDir, parent, sha string, sets ...*secretscan.Set) (string, bool, error) {
	if !ident.ValidSHA(parent) || !ident.ValidSHA(sha) {
		return "", false, ErrMirror
	}
	commit, err := r.Run(ctx, gitx.Cmd{GitDir: gitDir, Args: []string{"cat-file", "commit", sha}})
	if err != nil {
		return "", false, ErrMirror
	}
	for _, s := range sets {
		if s.Contains(commit) {
			return "", true, nil
		}
	}
	out, err := r.Run(ctx, gitx.Cmd{GitDir: gitDir, Args: []string{"diff-tree", "-r", "-z", "--raw", "--no-renames",
		"--no-abbrev", "--no-ext-diff", parent, sha}})
	if err != nil {
		return "", false, ErrMirror
	}
	changes, err := gitx.ParseRaw(out)
	if err != nil {
		return "", false, ErrMirror
	}
	path, found, err := r.FindSecret(ctx, gitDir, changes, sets...)
	if err != nil {
		return "", false, ErrMirror
	}
	return path, found, nil
}
