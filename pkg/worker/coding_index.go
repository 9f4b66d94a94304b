package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// The Worker's private index.
//
// The worktree's own index (<admin>/index) is writable by the plugin: it
// can stage a blob other than the worktree file, mark an entry
// assume-unchanged or skip-worktree, or write an entry whose stat data
// matches the worktree file so that git never looks at its content. Any
// of these would make the staged tree (and so the candidate) differ from
// the files the checks run against. So the Worker never uses that index
// after the plugin started: right after git worktree add it copies the
// index git just wrote (valid stat data for the base checkout, no flags)
// into its private git directory (j.gitHome, never given to the plugin),
// and every staging command (add -A, write-tree, diff-index, ls-files)
// runs with GIT_INDEX_FILE pointing at that copy. Unchanged files keep
// git's stat cache; changed ones are re-read: before staging,
// forgetChanged drops from the copy every file whose ctime says it
// changed since the copy was made (the mirror's links change every
// ctime, so git itself does not compare it), and the copy is dated a
// second after that moment, so git's racy-entry rule (entries not older
// than the index are compared by content) has nothing left to catch.
// stagingConfigEnv pins the settings under which a stat match really
// means "unchanged" whatever the operator configured.

// stagingEnv is the environment of the Worker's staging commands: the
// private index and stagingConfigEnv.
func stagingEnv(index string) []string {
	return append([]string{"GIT_INDEX_FILE=" + index}, stagingConfigEnv()...)
}

// stagingConfigEnv is the configuration every command that writes or
// reads the private index runs with, as GIT_CONFIG_* entries (of
// command-line strength). git worktree add runs with it too, so the index
// it writes has no flagged entries.
func stagingConfigEnv() []string {
	settings := [...][2]string{
		{"core.trustctime", "false"},     // the mirror's links change every ctime: forgetChanged
		{"core.checkStat", "default"},    // compare every stat field
		{"core.ignoreStat", "false"},     // never mark entries assume-unchanged
		{"core.sparseCheckout", "false"}, // no skip-worktree entries
		{"core.splitIndex", "false"},     // one self-contained index file
		{"core.untrackedCache", "false"}, // no cached directory listings
		{"index.sparse", "false"},        // no sparse directory entries
		{"core.protectNTFS", "true"},     // git refuses NTFS .git variants (isGitName matches them too)
	}
	var env []string
	for i, kv := range settings {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(settings)))
}

// privateIndex is the path of the attempt's private index.
func (j *codingJob) privateIndex() string {
	return filepath.Join(j.gitHome, "staging-index")
}

// stagingCmd is a git command in the stage repository over the
// workspace's mirror (coding_stage.go), with the private index.
func (j *codingJob) stagingCmd(args ...string) gitx.Cmd {
	return gitx.Cmd{GitDir: j.stageGitDir(), WorkTree: j.shadow, Dir: j.shadow, Env: j.stageEnv(stagingEnv(j.privateIndex())...), Args: args}
}

// maxIndexFile bounds the index savePrivateIndex copies: room for
// maxStageEntries entries with long paths.
const maxIndexFile = 256 << 20

// savePrivateIndex copies the index git worktree add wrote to the
// private index and notes the moment (indexedAt: the change time a probe
// file made beside the tree gets); the copy's modification time is a
// second later.
// It runs before the plugin starts; the index is read like every file of
// the attempt (attemptfs.go: beneath its directory, not followed, a
// regular file, at most maxIndexFile bytes).
func (j *codingJob) savePrivateIndex() error {
	dir, err := openDirNoFollow(j.admin)
	if err != nil {
		return err
	}
	defer dir.Close()
	src, fi, err := openBeneath(dir, "index")
	if err != nil {
		return err
	}
	defer src.Close()
	if !fi.Mode().IsRegular() {
		return errNotRegular
	}
	if fi.Size() > maxIndexFile {
		return errTooLarge
	}
	dst, err := os.OpenFile(j.privateIndex(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(dst, io.LimitReader(src, maxIndexFile+1))
	if err == nil && n > maxIndexFile {
		err = errTooLarge // it grew while copied
	}
	if err := errors.Join(err, dst.Close()); err != nil {
		return err
	}
	if j.indexedAt, err = ctimeNow(filepath.Dir(j.wt)); err != nil {
		return err
	}
	// A second past indexedAt: no entry is racily clean (forgetChanged
	// lists what changed since, by its ctime).
	t := time.Unix(0, j.indexedAt).Add(time.Second)
	return os.Chtimes(j.privateIndex(), t, t)
}

// forgetChanged drops from the private index the tree paths the mirror
// found changed since it was saved (mirrorWalk.changed), so that git add
// -A reads each of them as new. The rest are the inodes git checked out,
// untouched since (their ctime is older than indexedAt: a write, a
// truncate, a chmod, a utimes, a link or a rename of an inode all set its
// ctime to the present, which no unprivileged process can set back),
// and keep git's stat cache although linking them into the mirror gave
// them a new ctime: staging does not compare ctime (stagingConfigEnv).
// An inode swapped in for another differs in its inode number, which
// git does compare.
func (j *codingJob) forgetChanged(ctx context.Context, changed []string) error {
	if len(changed) == 0 {
		return nil
	}
	var in bytes.Buffer
	for _, p := range changed {
		in.WriteString(p)
		in.WriteByte(0)
	}
	c := j.stagingCmd("update-index", "--force-remove", "-z", "--stdin")
	c.Stdin = in.Bytes()
	_, err := j.git.Run(ctx, c)
	return err
}

// refusedPath runs after git add -A failed and reports whether the
// change holds a path that may not enter a tree and that git itself
// refuses to stage: among what staging would add (untracked, not
// ignored), a component naming a Git directory, a nested repository
// (listed with a trailing slash) or a symlink named .gitmodules; among
// the tracked paths, a .gitmodules that became a symlink. Only the
// failure path pays for these listings, bounded by git_output_bytes; a
// listing that fails leaves the failure a git failure.
func (j *codingJob) refusedPath(ctx context.Context) bool {
	out, err := j.git.Run(ctx, j.stagingCmd("ls-files", "-z", "--others", "--exclude-standard"))
	if err != nil {
		return false
	}
	for _, p := range bytes.Split(out, []byte{0}) {
		s := string(p)
		switch {
		case s == "":
		case strings.HasSuffix(s, "/") || !safeTreePath(s):
			return true
		case isGitModulesName(path.Base(s)) && j.isSymlink(s):
			return true
		}
	}
	out, err = j.git.Run(ctx, j.stagingCmd("ls-files", "-z", "--", ":(glob,icase)**/.gitmodules*"))
	if err != nil {
		return false
	}
	for _, p := range bytes.Split(out, []byte{0}) {
		if s := string(p); s != "" && isGitModulesName(path.Base(s)) && j.isSymlink(s) {
			return true
		}
	}
	return false
}

// isSymlink reports whether the tree path p is a symlink in the mirror.
func (j *codingJob) isSymlink(p string) bool {
	fi, err := os.Lstat(filepath.Join(j.shadow, filepath.FromSlash(p)))
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// isGitModulesName matches .gitmodules as git's path checks do (any
// case, trailing dots or spaces, an NTFS stream suffix).
func isGitModulesName(c string) bool {
	if i := strings.IndexByte(c, ':'); i >= 0 {
		c = c[:i]
	}
	return strings.EqualFold(strings.TrimRight(c, ". "), ".gitmodules")
}
