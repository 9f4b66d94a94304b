package worker

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// The worktree shares refs, config and hooks with the registered
// repository, so whatever the plugin (or a scoped check) does there lands
// in the operator's repository. Before the plugin runs the attempt saves
// that shared state; afterwards, violation or not, it puts it back:
// added refs are deleted, moved refs are reset and deleted refs recreated
// (each with a compare-and-swap against what the attempt saw), and the
// shared Git files and hooks get their saved bytes and modes again. If
// the state still differs after that, the repository is taken out of
// service for this Worker until it restarts (an operator repairs it).
//
// Candidate refs are refs like any other: the ones that existed when the
// baseline was saved (earlier jobs' candidates) are protected, and one
// the plugin adds, even under a made-up job or attempt, is a violation
// and is deleted. The only refs that may appear beside the baseline are
// the candidate refs this Worker itself creates meanwhile (createCandidate,
// for concurrent attempts on the repository): each is recorded with its
// commit in the repository's guard, under the same lock that saving the
// baseline, snapshots and restores hold, so every attempt expects exactly
// the baseline plus those refs at those commits. Such a ref is neither a
// violation of another attempt nor undone by its restore; deleting or
// moving it is a violation like any other ref change.

// sharedFiles are the common dir's files restored byte for byte.
// info/exclude, info/grafts and info/sparse-checkout change what `git add
// -A` stages and what history git sees; a commondir file would redirect
// the whole repository to another directory.
var sharedFiles = [...]string{"config", "config.worktree", "commondir", "info/attributes", "info/exclude", "info/grafts",
	"info/sparse-checkout", "objects/info/alternates", "shallow", "HEAD"}

// maxSharedFile bounds each saved file (a larger one fails preparation).
const maxSharedFile = 8 << 20

// savedFile is one saved file: absent, or a regular file's mode and bytes.
type savedFile struct {
	present bool
	mode    fs.FileMode
	data    []byte
}

// savedRef is one ref's value: an object id, or a symref target.
type savedRef struct {
	oid    string
	symref string
}

// savedState is the shared repository state an attempt restores.
type savedState struct {
	refs  map[string]savedRef
	files map[string]savedFile // by name relative to the common dir
	hooks map[string]savedFile // by entry name; nil map: no hooks dir
	// hooksDir reports whether the hooks directory existed.
	hooksDir bool
}

// repoGuardOf returns repository id's guard.
func (x *CodingExecutor) repoGuardOf(id string) *repoGuard {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.guard(id)
}

// createdRefs copies the candidate refs this Worker created while g's
// baseline was held.
func (x *CodingExecutor) createdRefs(g *repoGuard) map[string]string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return maps.Clone(g.created)
}

// createCandidate creates the attempt's candidate ref, only if it is
// absent, and records it for the attempts still running on the
// repository (whose baseline predates it).
func (j *codingJob) createCandidate(ctx context.Context, ref, sha string) error {
	g := j.x.repoGuardOf(j.task.RepositoryID)
	g.refs.Lock()
	defer g.refs.Unlock()
	if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: j.repo.common,
		Args: []string{"update-ref", "--no-deref", ref, sha, zeroSHA}}); err != nil {
		return err
	}
	j.x.mu.Lock()
	defer j.x.mu.Unlock()
	if g.inFlight > 0 {
		if g.created == nil {
			g.created = map[string]string{}
		}
		g.created[ref] = sha
	}
	return nil
}

// listRefs lists every ref.
func (j *codingJob) listRefs(ctx context.Context) (map[string]savedRef, error) {
	out, err := j.git.Run(ctx, gitx.Cmd{GitDir: j.repo.common,
		Args: []string{"for-each-ref", "--format=%(objectname)%09%(symref)%09%(refname)"}})
	if err != nil {
		return nil, err
	}
	refs := map[string]savedRef{}
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[2] == "" {
			return nil, errors.New("unexpected ref listing")
		}
		refs[f[2]] = savedRef{oid: f[0], symref: f[1]}
	}
	return refs, nil
}

// saveShared reads the shared state.
func (j *codingJob) saveShared(ctx context.Context) (savedState, error) {
	refs, err := j.listRefs(ctx)
	if err != nil {
		return savedState{}, err
	}
	s := savedState{refs: refs, files: map[string]savedFile{}}
	for _, n := range sharedFiles {
		sf, err := readSaved(filepath.Join(j.repo.common, n))
		if err != nil {
			return savedState{}, err
		}
		s.files[n] = sf
	}
	hooks := filepath.Join(j.repo.common, "hooks")
	ents, err := os.ReadDir(hooks)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return savedState{}, err
	default:
		s.hooksDir, s.hooks = true, map[string]savedFile{}
		for _, e := range ents {
			sf, err := readSaved(filepath.Join(hooks, e.Name()))
			if err != nil {
				return savedState{}, err
			}
			s.hooks[e.Name()] = sf
		}
	}
	return s, nil
}

// readSaved reads one file; only regular files (or absence) are saved.
func readSaved(p string) (savedFile, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return savedFile{}, nil
	}
	if err != nil {
		return savedFile{}, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return savedFile{}, err
		}
		return savedFile{present: true, mode: fs.ModeSymlink, data: []byte(t)}, nil
	case fi.IsDir():
		return savedFile{present: true, mode: fs.ModeDir}, nil
	case !fi.Mode().IsRegular() || fi.Size() > maxSharedFile:
		return savedFile{}, errors.New("unsupported shared file")
	}
	// Read through a descriptor, bounded: the file may have been
	// replaced since the lstat (a huge or sparse one, a FIFO).
	b, err := readAttemptFile(p, maxSharedFile)
	if err != nil {
		return savedFile{}, errors.New("unsupported shared file")
	}
	return savedFile{present: true, mode: fi.Mode().Perm(), data: b}, nil
}

// restoreShared puts the saved state back and reports whether the shared
// state now equals it. It uses its own bounded context, so a cancelled
// attempt still restores.
func (j *codingJob) restoreShared(saved savedState) bool {
	timeout := 10 * time.Second
	if j.inv != nil {
		timeout = j.inv.exec.CleanupTimeout.Std()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	g := j.x.repoGuardOf(j.task.RepositoryID)
	g.refs.Lock() // no candidate ref appears between reading and checking
	defer g.refs.Unlock()
	want := saved
	want.refs = maps.Clone(saved.refs)
	for ref, sha := range j.x.createdRefs(g) {
		want.refs[ref] = savedRef{oid: sha}
	}
	if now, err := j.listRefs(ctx); err == nil {
		j.restoreRefs(ctx, want.refs, now)
	}
	for _, n := range sharedFiles {
		restoreFile(filepath.Join(j.repo.common, n), saved.files[n])
	}
	restoreHooks(filepath.Join(j.repo.common, "hooks"), saved)
	after, err := j.saveShared(ctx)
	return err == nil && sameState(want, after)
}

// restoreRefs resets refs that differ. Plain refs go through one
// update-ref transaction with the observed values as the expected old
// values; symrefs are set one by one. Nothing is ever dereferenced.
func (j *codingJob) restoreRefs(ctx context.Context, saved, now map[string]savedRef) {
	var tx bytes.Buffer
	var syms []string
	for ref, cur := range now {
		old, ok := saved[ref]
		switch {
		case ok && old == cur:
		case !ok && cur.symref == "":
			tx.WriteString("delete " + ref + "\x00" + cur.oid + "\x00")
		case !ok:
			tx.WriteString("delete " + ref + "\x00\x00")
		case old.symref != "":
			syms = append(syms, ref)
		case cur.symref == "":
			tx.WriteString("update " + ref + "\x00" + old.oid + "\x00" + cur.oid + "\x00")
		default:
			tx.WriteString("update " + ref + "\x00" + old.oid + "\x00\x00")
		}
	}
	for ref, old := range saved {
		if _, ok := now[ref]; ok {
			continue
		}
		if old.symref != "" {
			syms = append(syms, ref)
			continue
		}
		tx.WriteString("create " + ref + "\x00" + old.oid + "\x00")
	}
	if tx.Len() > 0 {
		_, _ = j.git.Run(ctx, gitx.Cmd{GitDir: j.repo.common, Stdin: tx.Bytes(),
			Args: []string{"update-ref", "--no-deref", "--stdin", "-z"}})
	}
	for _, ref := range syms {
		_, _ = j.git.Run(ctx, gitx.Cmd{GitDir: j.repo.common,
			Args: []string{"symbolic-ref", ref, saved[ref].symref}})
	}
}

// restoreFile gives p its saved content (or removes it) when it differs.
func restoreFile(p string, saved savedFile) {
	if now, err := readSaved(p); err == nil && sameFile(saved, now) {
		return
	}
	switch {
	case !saved.present:
		_ = os.RemoveAll(p)
	case saved.mode.Type() == fs.ModeSymlink:
		_ = os.RemoveAll(p)
		_ = os.Symlink(string(saved.data), p)
	case saved.mode.Type() == fs.ModeDir:
		_ = os.RemoveAll(p)
		_ = os.Mkdir(p, 0o755)
	default:
		_ = writeAtomic(p, saved) // a rename replaces a file or symlink
	}
}

// writeAtomic writes a temporary file next to p and renames it over p.
func writeAtomic(p string, f savedFile) error {
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".forge-restore-")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, werr := tmp.Write(f.data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr, os.Chmod(name, f.mode)); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, p); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

// restoreHooks removes hooks the attempt added and restores changed ones.
func restoreHooks(dir string, saved savedState) {
	if !saved.hooksDir {
		_ = os.RemoveAll(dir)
		return
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		_ = os.RemoveAll(dir)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if _, ok := saved.hooks[e.Name()]; !ok {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	for name, f := range saved.hooks {
		restoreFile(filepath.Join(dir, name), f)
	}
}

func sameFile(a, b savedFile) bool {
	return a.present == b.present && a.mode == b.mode && bytes.Equal(a.data, b.data)
}

// sameState compares two saved states.
func sameState(a, b savedState) bool {
	if len(a.refs) != len(b.refs) || len(a.hooks) != len(b.hooks) || a.hooksDir != b.hooksDir {
		return false
	}
	for k, v := range a.refs {
		if w, ok := b.refs[k]; !ok || w != v {
			return false
		}
	}
	for _, n := range sharedFiles {
		if !sameFile(a.files[n], b.files[n]) {
			return false
		}
	}
	for k, v := range a.hooks {
		if w, ok := b.hooks[k]; !ok || !sameFile(v, w) {
			return false
		}
	}
	return true
}
