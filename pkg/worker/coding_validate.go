package worker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/ident"
)

// stateChange names what differs between two snapshots ("" if nothing).
func stateChange(before, after gitState) evidence.Reason {
	switch {
	case after.meta != before.meta:
		return evidence.ReasonGitDirChanged
	case !bytes.Equal(after.refs, before.refs):
		return evidence.ReasonRefsChanged
	case after.config != before.config:
		return evidence.ReasonConfigChanged
	}
	return ""
}

// validate runs the workspace validation phase and returns the staged
// tree.
func (j *codingJob) validate(ctx context.Context, before gitState) (string, outcome, bool) {
	const P = evidence.PhaseWorkspaceValidation
	fail := func(r evidence.Reason, code string) (string, outcome, bool) {
		return "", j.fail(P, r, code), false
	}
	head, err := readAttemptFile(filepath.Join(j.admin, "HEAD"), maxGitFile)
	if err != nil || string(head) != j.task.BaseSHA+"\n" {
		return fail(evidence.ReasonHeadMoved, codeCodingTerminal)
	}
	// The git files first, without git: a change there (a config, a
	// hook, a huge file in their place) fails before git reads them.
	files, err := j.fileState()
	if err != nil {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	}
	files.refs = before.refs
	if r := stateChange(before, files); r != "" {
		return fail(r, codeCodingTerminal)
	}
	after, err := j.snapshot(ctx)
	if err != nil {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	}
	if r := stateChange(before, after); r != "" {
		return fail(r, codeCodingTerminal)
	}
	// Staging never trusts the worktree's index, which the plugin can
	// write: every command below uses the Worker's private index, in the
	// stage repository, over the workspace's mirror (coding_stage.go).
	m, err := j.mirror()
	defer j.dropMirror()
	if errors.Is(err, errTreeShape) {
		return fail(evidence.ReasonPathEscape, codeCodingTerminal)
	}
	if err != nil {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	}
	run := func(args ...string) ([]byte, error) {
		return j.git.Run(ctx, j.stagingCmd(args...))
	}
	if len(m.gitNamed) > 0 {
		staged, err := j.stagedGitNames(ctx, m.gitNamed)
		if err != nil {
			return fail(evidence.ReasonGitFailed, codeCodingRetryable)
		}
		if staged {
			return fail(evidence.ReasonPathEscape, codeCodingTerminal)
		}
	}
	// A huge (or sparse) file git would read fails before git reads it.
	if ok, err := j.withinStageBounds(ctx, m); err != nil {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	} else if !ok {
		return fail(evidence.ReasonPathEscape, codeCodingTerminal)
	}
	if err := j.forgetChanged(ctx, m.changed); err != nil {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	}
	if _, err := run("add", "-A"); err != nil {
		// Git refuses some paths (a .git variant, a nested repository
		// without a commit, a symlinked .gitmodules): those are a path
		// escape, not a git failure worth retrying.
		if _, exited := gitx.ExitCode(err); exited && j.refusedPath(ctx) {
			return fail(evidence.ReasonPathEscape, codeCodingTerminal)
		}
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	}
	out, err := run("write-tree")
	tree := strings.TrimSuffix(string(out), "\n")
	if err != nil || !ident.ValidSHA(tree) {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	}
	out, err = run("rev-parse", "--verify", "-q", j.task.BaseSHA+"^{tree}")
	if err != nil {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	}
	if strings.TrimSuffix(string(out), "\n") == tree {
		return fail(evidence.ReasonEmptyChange, codeCodingTerminal)
	}
	out, err = run("diff-index", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", j.task.BaseSHA)
	if err != nil {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	}
	changes, err := gitx.ParseRaw(out)
	if err != nil {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	}
	var links []gitx.Change
	for _, c := range changes {
		if !safeTreePath(c.Path) || c.NewMode == gitx.ModeGitlink {
			return fail(evidence.ReasonPathEscape, codeCodingTerminal)
		}
		if c.NewMode == gitx.ModeSymlink {
			if isGitModulesName(path.Base(c.Path)) {
				// git refuses to check such a tree out again
				return fail(evidence.ReasonPathEscape, codeCodingTerminal)
			}
			links = append(links, c)
		}
	}
	if len(links) > 0 {
		ok, err := j.linksStayInside(ctx, links)
		if err != nil {
			return fail(evidence.ReasonGitFailed, codeCodingRetryable)
		}
		if !ok {
			return fail(evidence.ReasonPathEscape, codeCodingTerminal)
		}
	}
	if file, found, err := j.findSecret(ctx, changes); err != nil {
		return fail(evidence.ReasonGitFailed, codeCodingRetryable)
	} else if found {
		return "", j.failSecret(file), false
	}
	return tree, outcome{}, true
}

// safeTreePath rejects empty, absolute, dot and dot-dot components and
// any component that names a Git directory.
func safeTreePath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || strings.ContainsRune(p, '\\') {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." || isGitName(c) {
			return false
		}
	}
	return true
}

// isGitName matches ".git" case-insensitively, also with the trailing
// dots or spaces some filesystems drop, as its NTFS short name "git~1",
// and with an NTFS stream suffix (":…"), as git's own path checks do.
func isGitName(c string) bool {
	if i := strings.IndexByte(c, ':'); i >= 0 {
		c = c[:i]
	}
	c = strings.TrimRight(c, ". ")
	return strings.EqualFold(c, ".git") || strings.EqualFold(c, "git~1")
}

// linksStayInside reads the targets of the added or changed symlinks and
// requires each to be relative and to resolve, lexically from the link's
// directory, to a path inside the tree that is not in a Git directory.
func (j *codingJob) linksStayInside(ctx context.Context, links []gitx.Change) (bool, error) {
	var stdin bytes.Buffer
	for _, l := range links {
		stdin.WriteString(l.NewSHA + "\n")
	}
	out, err := j.git.Run(ctx, gitx.Cmd{GitDir: j.objectsGitDir(), Stdin: stdin.Bytes(), Args: []string{"cat-file", "--batch"}})
	if err != nil {
		return false, err
	}
	for _, l := range links {
		target, rest, ok := nextBlob(out, l.NewSHA)
		if !ok {
			return false, errBadBatch
		}
		out = rest
		if !linkInside(l.Path, string(target)) || !j.resolvesInside(l.Path) {
			return false, nil
		}
	}
	return true, nil
}

type batchError struct{}

func (batchError) Error() string { return "malformed cat-file output" }

var errBadBatch error = batchError{}

// nextBlob takes one "<sha> blob <size>\n<content>\n" entry off b.
func nextBlob(b []byte, sha string) ([]byte, []byte, bool) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return nil, nil, false
	}
	f := strings.Fields(string(b[:nl]))
	if len(f) != 3 || f[0] != sha || f[1] != "blob" {
		return nil, nil, false
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 0 || nl+1+n+1 > len(b) || b[nl+1+n] != '\n' {
		return nil, nil, false
	}
	return b[nl+1 : nl+1+n], b[nl+1+n+1:], true
}

// linkInside reports whether a symlink at linkPath (tree-relative) with
// the given target stays inside the tree and out of any Git directory.
func linkInside(linkPath, target string) bool {
	if strings.HasPrefix(linkPath, "/") || target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) || strings.ContainsRune(target, '\\') {
		return false
	}
	resolved := path.Clean(path.Join(path.Dir(linkPath), target))
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return false
	}
	if resolved == "." {
		return true
	}
	for _, c := range strings.Split(resolved, "/") {
		if isGitName(c) {
			return false
		}
	}
	return true
}

// resolvesInside follows the link physically in the workspace's mirror
// (through any symlinked directories; the mirror is the Worker's, its
// links the workspace's) and requires the result inside it. A dangling
// link passes on its lexical check alone.
func (j *codingJob) resolvesInside(linkPath string) bool {
	real, err := filepath.EvalSymlinks(filepath.Join(j.shadow, filepath.FromSlash(linkPath)))
	if err != nil {
		return os.IsNotExist(err)
	}
	rel, err := filepath.Rel(j.shadow, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return false
	}
	return rel == "." || linkInside(".", rel)
}
