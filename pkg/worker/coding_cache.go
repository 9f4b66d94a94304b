package worker

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/source"
)

// The source cache. A Gate registration (worker.json "source":"gate")
// keeps one bare repository per repository id at
// <runtime_root>/sources/<id>.git, owned by this Worker and written only
// by it, one fetch at a time per repository. It holds the bases fetched
// so far, each pinned by refs/forge/bases/<sha> (nothing is ever
// garbage-collected: removing the directory while the Worker is stopped
// is always safe, the next attempt fetches cold). An attempt whose base
// is already there transfers nothing; otherwise the Worker asks the Gate
// for the base minus the newest MaxHaves bases it holds, so only new
// objects cross. Attempts never write the cache: their repositories
// borrow its objects read-only through objects/info/alternates
// (coding_attempt.go).

// sourcesDir is the cache root under runtime_root; SweepRuntime leaves it.
const sourcesDir = "sources"

// basesPrefix pins each fetched base in the cache.
const basesPrefix = "refs/forge/bases/"

// MaxBaseBundleBytes bounds one base bundle the Worker accepts.
const MaxBaseBundleBytes = 16 << 30

// maxCacheHaves is how many cached bases a fetch names (wire.MaxHaves).
const maxCacheHaves = 32

// CacheDir is repository id's source cache under runtimeRoot.
func CacheDir(runtimeRoot, id string) string {
	return filepath.Join(runtimeRoot, sourcesDir, id+".git")
}

// ensureBase makes the lease's base a commit of the repository's cache,
// fetching it from the Gate when it is not, and returns the cache's path.
func (j *codingJob) ensureBase(ctx context.Context) (string, error) {
	id, base := j.task.RepositoryID, j.task.BaseSHA
	cache := CacheDir(j.x.cfg.RuntimeRoot, id)
	lock := j.x.cacheLock(id)
	lock.Lock()
	defer lock.Unlock()
	if err := j.initCache(ctx, cache); err != nil {
		return "", err
	}
	if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: []string{"cat-file", "-e", base + "^{commit}"}}); err == nil {
		return cache, nil
	} else if _, exited := gitx.ExitCode(err); !exited {
		return "", err
	}
	if j.attempt.Gate == nil {
		return "", errors.New("no gate link")
	}
	out, err := j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: []string{"for-each-ref", "--sort=-creatordate",
		"--count=" + strconv.Itoa(maxCacheHaves), "--format=%(objectname)", basesPrefix}})
	if err != nil {
		return "", err
	}
	haves := strings.Fields(string(out))
	// Only this Worker writes the cache, one fetch at a time: a lock on
	// the base's ref is what a killed fetch left behind.
	if err := os.Remove(filepath.Join(cache, filepath.FromSlash(basesPrefix+base+".lock"))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	file := filepath.Join(j.gitHome, "base.bundle")
	tctx, cancel := context.WithTimeout(ctx, j.git.Timeout)
	defer cancel()
	_, err = j.attempt.Gate.FetchBase(tctx, base, haves, file, MaxBaseBundleBytes)
	if err != nil {
		return "", err
	}
	defer os.Remove(file)
	if err := checkBaseBundle(file, base, haves); err != nil {
		return "", err
	}
	if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: cache, Bundle: true, Args: []string{"fetch", "--quiet", "--no-tags",
		"--no-write-fetch-head", "--no-auto-maintenance", "--no-recurse-submodules", file,
		source.BaseRef + ":" + basesPrefix + base}}); err != nil {
		return "", err
	}
	return cache, nil
}

// initCache creates the cache repository on first use: a bare repository
// without template, made under a temporary name and renamed into place.
func (j *codingJob) initCache(ctx context.Context, cache string) error {
	if fi, err := os.Lstat(cache); err == nil {
		if !fi.IsDir() {
			return errors.New("source cache is not a directory")
		}
		return nil
	}
	root := filepath.Dir(cache)
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	tmp, err := os.MkdirTemp(root, ".init-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := j.git.Run(ctx, gitx.Cmd{Args: []string{"init", "--quiet", "--bare", "--template=", tmp}}); err != nil {
		return err
	}
	return os.Rename(tmp, cache)
}

// checkBaseBundle parses the bundle's header strictly: exactly one ref,
// source.BaseRef at base, and prerequisites among haves only.
func checkBaseBundle(path, base string, haves []string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, gitx.MaxBundleHeaderBytes+gitx.MaxBundleLineBytes+8)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	h, err := gitx.ParseBundleHeader(buf[:n])
	if err != nil {
		return err
	}
	if len(h.Refs) != 1 || h.Refs[0].SHA != base || h.Refs[0].Name != source.BaseRef {
		return errors.New("base bundle names another ref")
	}
	for _, p := range h.Prerequisites {
		if !slices.Contains(haves, p.SHA) {
			return errors.New("base bundle needs a commit the cache lacks")
		}
	}
	return nil
}
