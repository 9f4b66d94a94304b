package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// The Worker's own git (DECISIONS 21). Everything the Worker's git does
// after the plugin started (staging, the candidate commit, its bundle)
// runs in a git directory only the Worker writes, the attempt's stage
// repository <gitHome>/stage.git (runtime_root, never given to the
// plugin): its own HEAD, config, index and no commondir. It reaches the
// base's objects without owning them: on a Gate registration through
// objects/info/alternates naming the source cache's objects (the commit
// is written into stage.git, bundled from there), on a static one by
// writing into the operator repository's objects (GIT_OBJECT_DIRECTORY;
// the candidate ref goes there too). The attempt's own git directory
// (its config, hooks, HEAD, index, refs, commondir) is never read by any
// git the Worker runs once the plugin started, so no filter, hook,
// fsmonitor or include of the attempt's can run.
//
// Nor does git read the workspace: staging runs over a mirror, a
// Worker-private directory (wt-stage-* beside the containers, on their
// file system) whose directories the Worker makes and whose files and
// symbolic links are hard links to the workspace's inodes (copies where
// no link can be made). The Worker builds it walking the workspace
// through descriptors from the container's (openat with O_NOFOLLOW), so
// a directory or the whole tree swapped for a symbolic link to outside
// leads nowhere: the walk fails, or the link is mirrored as a link. The
// staged tree is then exactly what git add -A makes of those files,
// with the tree's .gitignore and .gitattributes files (as data: no
// filter of theirs has a command) and, on a static registration, the
// operator's info/exclude as saved before the plugin ran.

// Bounds of the mirror: entries, depth, tree path length.
const (
	maxStageEntries = 1 << 20
	maxStageDepth   = 256
	maxStagePath    = 4096
)

// Bounds of what staging may read: one regular file (a larger one is
// left out of the mirror) and all the files git would stage together
// (apparent sizes: a sparse file counts as what git would read). Files
// the tree's ignore rules cover count for neither, since git does not
// read them; a file over the bound that they do not cover, or a total
// over it, fails the attempt before git reads anything (a path escape,
// like the mirror's other bounds). Files of at least stageLargeFile are
// remembered by name, so the ignored ones can be taken off the total.
const (
	maxStageFile   = 1 << 30
	maxStageBytes  = 4 << 30
	stageLargeFile = 1 << 20
)

type stageError string

func (e stageError) Error() string { return string(e) }

// errTreeShape: the workspace is beyond the mirror's bounds, or changed
// while mirrored (a directory became something else): a path escape.
const errTreeShape = stageError("workspace changed or too large while mirrored")

// stageGitDir is the attempt's stage repository.
func (j *codingJob) stageGitDir() string { return filepath.Join(j.gitHome, "stage.git") }

// stageEnv is the environment of every command in the stage repository:
// on a static registration its objects are the operator repository's.
func (j *codingJob) stageEnv(extra ...string) []string {
	if j.gate {
		return extra
	}
	return append([]string{"GIT_OBJECT_DIRECTORY=" + filepath.Join(j.repo.common, "objects")}, extra...)
}

// objectsGitDir is where the Worker reads the objects it staged and
// writes the candidate commit: the stage repository on a Gate
// registration, the operator's repository (never writable by a sandboxed
// agent) on a static one.
func (j *codingJob) objectsGitDir() string {
	if j.gate {
		return j.stageGitDir()
	}
	return j.repo.common
}

// stageCmd is a git command in the stage repository.
func (j *codingJob) stageCmd(args ...string) gitx.Cmd {
	return gitx.Cmd{GitDir: j.stageGitDir(), Env: j.stageEnv(), Args: args}
}

// initStage creates the stage repository before the plugin starts: a
// bare repository without template, borrowing sharedObjects on a Gate
// registration, and, on a static one, the common dir's info/exclude
// (read through a descriptor, bounded).
func (j *codingJob) initStage(ctx context.Context, sharedObjects string) error {
	p := j.stageGitDir()
	if _, err := j.git.Run(ctx, gitx.Cmd{Args: []string{"init", "--quiet", "--bare", "--template=", p}}); err != nil {
		return err
	}
	info := filepath.Join(p, "info")
	if err := os.MkdirAll(filepath.Join(p, "objects", "info"), 0o700); err != nil {
		return err
	}
	if j.gate {
		return os.WriteFile(filepath.Join(p, "objects", "info", "alternates"), []byte(sharedObjects+"\n"), 0o600)
	}
	b, err := readAttemptFile(filepath.Join(j.repo.common, "info", "exclude"), maxSharedFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Mkdir(info, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(info, "exclude"), b, 0o600)
}

// mirror makes the attempt's mirror of its workspace (above) and returns
// what the walk found: the tree paths of the Git-named entries below the
// workspace's own .git (nested repositories and their variants: never
// mirrored; validation refuses the ones git would stage) and the sizes
// stageBounds checks.
func (j *codingJob) mirror() (*mirrorWalk, error) {
	shadow, err := os.MkdirTemp(j.x.cfg.WorktreeRoot, "wt-stage-")
	if err != nil {
		return nil, err
	}
	j.shadow = shadow
	dst, err := openDirNoFollow(shadow)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	c, err := openDirNoFollow(j.container)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	src, err := openDirAt(c, filepath.Base(j.wt))
	if err != nil {
		return nil, errTreeShape // the workspace is no directory (any more)
	}
	defer src.Close()
	m := &mirrorWalk{since: j.indexedAt}
	if err := m.dir(src, dst, "", 0); err != nil {
		return nil, err
	}
	return m, nil
}

// dropMirror removes the mirror once validation is done with it (cleanup
// removes one left behind).
func (j *codingJob) dropMirror() {
	if j.shadow != "" && removeTree(j.shadow) == nil {
		j.shadow = ""
	}
}

type mirrorWalk struct {
	entries  int
	gitNamed []string
	bytes    int64    // the mirrored regular files' sizes
	over     []string // regular files over maxStageFile: not mirrored
	large    []sizedPath
	since    int64    // indexedAt
	changed  []string // files and links whose ctime is not before since
}

// sizedPath is a mirrored file of at least stageLargeFile bytes.
type sizedPath struct {
	path string
	size int64
}

// dir mirrors the directory src (tree path rel) into dst.
func (m *mirrorWalk) dir(src, dst *os.File, rel string, depth int) error {
	if depth > maxStageDepth {
		return errTreeShape
	}
	for {
		ents, err := src.ReadDir(1024)
		for _, e := range ents {
			if err := m.entry(src, dst, rel, depth, e); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(ents) == 0) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (m *mirrorWalk) entry(src, dst *os.File, rel string, depth int, e fs.DirEntry) error {
	name := e.Name()
	if rel == "" && name == ".git" {
		return nil // the workspace's own .git file
	}
	p := path.Join(rel, name)
	if m.entries++; m.entries > maxStageEntries || len(p) > maxStagePath {
		return errTreeShape
	}
	if isGitName(name) {
		m.gitNamed = append(m.gitNamed, p)
		return nil
	}
	switch t := e.Type(); {
	case t.IsDir():
		sub, err := openDirAt(src, name)
		if err != nil {
			return errTreeShape // swapped since it was listed
		}
		defer sub.Close()
		dsub, err := mkdirAt(dst, name, 0o700)
		if err != nil {
			return err
		}
		defer dsub.Close()
		return m.dir(sub, dsub, p, depth+1)
	case t.IsRegular(), t&fs.ModeSymlink != 0:
		size, ctime, err := statAt(src, name)
		if err != nil {
			return errTreeShape // swapped since it was listed
		}
		if ctime >= m.since {
			m.changed = append(m.changed, p)
		}
		if t.IsRegular() {
			if size > maxStageFile {
				m.over = append(m.over, p)
				return nil
			}
			m.bytes += size
			if size >= stageLargeFile {
				m.large = append(m.large, sizedPath{p, size})
			}
		}
		if linkAt(src, dst, name) == nil {
			return nil
		}
		return copyEntry(src, dst, name)
	default:
		return nil // FIFOs, sockets, devices: git stages none
	}
}

// copyEntry mirrors name by copying, where no hard link can be made (the
// mirror on another file system, a file of another owner): a regular
// file's bytes and executable bit, a symbolic link's target.
func copyEntry(src, dst *os.File, name string) error {
	f, fi, err := openBeneath(src, name)
	if errors.Is(err, errSymlink) {
		t, err := readlinkAt(src, name)
		if err != nil {
			return errTreeShape
		}
		return symlinkAt(t, dst, name)
	}
	if err != nil {
		return errTreeShape
	}
	defer f.Close()
	if !fi.Mode().IsRegular() {
		return errTreeShape
	}
	perm := uint32(0o644)
	if fi.Mode().Perm()&0o100 != 0 {
		perm = 0o755
	}
	out, err := createAt(dst, name, perm)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(f, maxStageFile+1))
	if err == nil && n > maxStageFile {
		err = errTreeShape // it grew past the bound while copied
	}
	return errors.Join(err, out.Close())
}

// stagedGitNames reports whether git add -A would take any of the
// Git-named entries the mirror left out: one that no ignore rule covers
// is a nested repository or a .git variant in the change, which
// validation refuses as git would.
func (j *codingJob) stagedGitNames(ctx context.Context, names []string) (bool, error) {
	ignored, err := j.ignoredAmong(ctx, names)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if !ignored[n] {
			return true, nil
		}
	}
	return false, nil
}

// withinStageBounds reports whether what git add -A would read of the
// mirror's walk m is within maxStageFile and maxStageBytes (above): only
// when a bound is passed are the ignore rules asked which of the files
// concerned git would leave alone.
func (j *codingJob) withinStageBounds(ctx context.Context, m *mirrorWalk) (bool, error) {
	if len(m.over) == 0 && m.bytes <= maxStageBytes {
		return true, nil
	}
	names := slices.Clone(m.over)
	if m.bytes > maxStageBytes {
		for _, l := range m.large {
			names = append(names, l.path)
		}
	}
	ignored, err := j.ignoredAmong(ctx, names)
	if err != nil {
		return false, err
	}
	for _, p := range m.over {
		if !ignored[p] {
			return false, nil
		}
	}
	total := m.bytes
	for _, l := range m.large {
		if ignored[l.path] {
			total -= l.size
		}
	}
	return total <= maxStageBytes, nil
}

// ignoredAmong runs check-ignore over the mirror for the tree paths
// names and returns the ones the tree's ignore rules (and, on a static
// registration, the saved info/exclude) cover.
func (j *codingJob) ignoredAmong(ctx context.Context, names []string) (map[string]bool, error) {
	var in bytes.Buffer
	for _, n := range names {
		in.WriteString(n)
		in.WriteByte(0)
	}
	c := j.stagingCmd("check-ignore", "-z", "--stdin")
	c.Stdin = in.Bytes()
	out, err := j.git.Run(ctx, c)
	ignored := map[string]bool{}
	if code, exited := gitx.ExitCode(err); exited && code == 1 {
		return ignored, nil // none is ignored
	}
	if err != nil {
		return nil, err
	}
	for _, p := range bytes.Split(out, []byte{0}) {
		ignored[string(p)] = true
	}
	return ignored, nil
}
