package worker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/source"
)

// The source cache. A Gate registration (worker.json "source":"gate")
// keeps one bare repository per repository id at
// <runtime_root>/sources/<id>.git, owned by this Worker and written only
// by it, one fetch at a time per repository. It holds the bases fetched
// or borrowed so far, each pinned by refs/forge/bases/<sha> (removing the directory
// while the Worker is stopped is always safe, the next attempt fetches
// cold). An attempt whose base is already there transfers nothing;
// otherwise the Worker asks the Gate for the base minus the newest
// MaxHaves bases it holds, so only new objects cross. Attempts never
// write the cache: their repositories borrow its objects read-only
// through objects/info/alternates (coding_attempt.go), and each attempt
// registers its base as borrowed until its container is gone.
//
// Every fetch adds one pack and one ref. Once a fetch leaves
// cacheMaintainPacks packs, the same fetch (still holding the cache's
// lock, so no other fetch runs) maintains the cache: it deletes the refs
// of the bases that are neither among the newest maxCacheHaves (what the
// next fetch names as haves) nor borrowed by an attempt, then repacks
// everything still reachable into one pack (git repack -a -d), which
// drops what only the deleted bases reached. A borrowed base keeps its
// ref, so every object its attempt can read stays; git writes the new
// pack before it deletes the old ones, and a reader that misses an object
// in a pack that went away looks again and finds it in the new one.

// sourcesDir is the cache root under runtime_root; SweepRuntime leaves it.
const sourcesDir = "sources"

// basesPrefix pins each fetched base in the cache.
const basesPrefix = "refs/forge/bases/"

// MaxBaseBundleBytes bounds one base bundle the Worker accepts.
const MaxBaseBundleBytes = 16 << 30

// maxCacheHaves is how many cached bases a fetch names (wire.MaxHaves).
const maxCacheHaves = 32

// cacheMaintainPacks is the number of packs at which a fetch maintains
// the cache: one full repack per cacheMaintainPacks-1 fetches.
const cacheMaintainPacks = 16

// CacheDir is repository id's source cache under runtimeRoot.
func CacheDir(runtimeRoot, id string) string {
	return filepath.Join(runtimeRoot, sourcesDir, id+".git")
}

// ensureBase makes the lease's base a whole commit of the repository's
// cache pinned by its own ref, fetching it from the Gate when it is not,
// and returns the cache's path. The ref is set under the cache's lock
// before the attempt borrows the base, so maintenance never drops what
// the attempt reads (a base that is only an ancestor of another cached
// base gets its own ref too). A cache found broken (a cached base whose
// tree is not whole, a ref to a commit it lacks, a bundle refused
// because a base the cache named as a have is not whole, or the Gate
// finding nothing to send for a base the cache lacks) is rebuilt from scratch once, when no attempt borrows from
// it, rather than failing every attempt.
func (j *codingJob) ensureBase(ctx context.Context) (string, error) {
	id := j.task.RepositoryID
	cache := CacheDir(j.x.cfg.RuntimeRoot, id)
	lock := j.x.cacheLock(id)
	lock.Lock()
	defer lock.Unlock()
	if err := j.initCache(ctx, cache); err != nil {
		return "", err
	}
	err := j.cacheBase(ctx, cache)
	if errors.Is(err, errCacheBroken) && len(j.x.borrowedBases(id)) == 0 {
		j.log().Warn("source cache rebuilt")
		if err = os.RemoveAll(cache); err == nil {
			if err = j.initCache(ctx, cache); err == nil {
				err = j.cacheBase(ctx, cache)
			}
		}
	}
	if err != nil {
		return "", err
	}
	j.borrowBase()
	return cache, nil
}

// errCacheBroken is a cache that cannot serve or take the lease's base.
var errCacheBroken = errors.New("source cache broken")

// cacheBase pins the base in the cache, fetching it first when the cache
// lacks it. The caller holds the cache's lock.
func (j *codingJob) cacheBase(ctx context.Context, cache string) error {
	base := j.task.BaseSHA
	ref := basesPrefix + base
	// Only this Worker writes the cache, one fetch at a time: a lock on
	// the base's ref is what a killed fetch left behind.
	if err := os.Remove(filepath.Join(cache, filepath.FromSlash(ref+".lock"))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	_, err := j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: []string{"cat-file", "-e", base + "^{commit}"}})
	if err == nil {
		// The commit is there (pinned, an ancestor of a pinned base, or
		// left by a killed fetch): its tree must be whole before it is
		// pinned and borrowed.
		if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: []string{"rev-list", "--objects", "--quiet", "--no-walk", base}}); err != nil {
			if _, exited := gitx.ExitCode(err); exited {
				return errCacheBroken
			}
			return err
		}
		_, err = j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: []string{"update-ref", "--no-deref", ref, base}})
		return err
	} else if _, exited := gitx.ExitCode(err); !exited {
		return err
	}
	return j.fetchBase(ctx, cache)
}

// fetchBase fetches the base from the Gate into the cache (the base minus
// the newest maxCacheHaves cached bases) and pins it, then maintains the
// cache. The caller holds the cache's lock.
func (j *codingJob) fetchBase(ctx context.Context, cache string) error {
	base := j.task.BaseSHA
	if j.attempt.Gate == nil {
		return errors.New("no gate link")
	}
	out, err := j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: []string{"for-each-ref", "--sort=-creatordate",
		"--count=" + strconv.Itoa(maxCacheHaves), "--format=%(objectname)", basesPrefix}})
	if _, exited := gitx.ExitCode(err); exited {
		return errCacheBroken // a ref names a commit the cache lacks
	}
	if err != nil {
		return err
	}
	haves := strings.Fields(string(out))
	file := filepath.Join(j.gitHome, "base.bundle")
	start := j.x.opt.Now()
	// git_timeout bounds each wait for the Gate, not the whole download:
	// a cold base of a large repository may take longer while it flows.
	idle := j.git.Timeout
	if idle <= 0 {
		idle = gitx.DefaultTimeout
	}
	size, err := j.attempt.Gate.FetchBase(ctx, base, haves, file, MaxBaseBundleBytes, idle)
	defer os.Remove(file)
	if linkStatus(err) == http.StatusConflict {
		return errCacheBroken // the cache names bases it does not hold
	}
	if err != nil {
		return err
	}
	objects, packAt, err := checkBaseBundle(file, base)
	if err != nil {
		return err
	}
	if err := j.storeBase(ctx, cache, file, packAt); err != nil {
		// Refused: the cache is at fault only when what it named as
		// haves is not whole (the bundle leans on them).
		var ge *gitx.Error
		if _, exited := gitx.ExitCode(err); exited && len(haves) > 0 && !(errors.As(err, &ge) && ge.OutputContains("fsck error")) {
			if _, werr := j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: append([]string{"rev-list", "--objects", "--quiet", "--no-walk"}, haves...)}); werr != nil {
				if _, exited := gitx.ExitCode(werr); exited {
					return errCacheBroken
				}
			}
		}
		return err
	}
	log := j.log()
	log.Info("base fetched", "objects", objects, "bytes", size, "haves", len(haves),
		"ms", j.x.opt.Now().Sub(start).Milliseconds())
	// The fetch stands whatever maintenance does: a failed repack leaves
	// at worst an extra pack, deleted refs only unreachable objects.
	if deleted, ran, err := j.maintainCache(ctx, cache); err != nil {
		log.Warn("source cache maintenance failed")
	} else if ran {
		log.Info("source cache maintained", "refs_deleted", deleted)
	}
	return nil
}

// log is the attempt's logger for the source cache: the repository id
// and, with a lease, the job and attempt (identifiers only).
func (j *codingJob) log() *slog.Logger {
	l := j.x.log.With("repository", j.task.RepositoryID)
	if j.lease != nil {
		l = l.With("job", j.lease.JobID, "attempt", j.lease.AttemptID)
	}
	return l
}

// borrowBase registers the attempt's base as borrowed (once).
func (j *codingJob) borrowBase() {
	if j.borrowed != "" {
		return
	}
	j.x.mu.Lock()
	defer j.x.mu.Unlock()
	g := j.x.guard(j.task.RepositoryID)
	if g.borrowed == nil {
		g.borrowed = map[string]int{}
	}
	g.borrowed[j.task.BaseSHA]++
	j.borrowed = j.task.BaseSHA
}

// releaseBase ends a borrowBase of base on repository id.
func (x *CodingExecutor) releaseBase(id, base string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.guard(id)
	if g.borrowed[base]--; g.borrowed[base] <= 0 {
		delete(g.borrowed, base)
	}
}

// borrowedBases returns the bases attempts on repository id borrow now.
func (x *CodingExecutor) borrowedBases(id string) map[string]bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	in := map[string]bool{}
	for b := range x.guard(id).borrowed {
		in[b] = true
	}
	return in
}

// maintainCache runs the cache's maintenance (above) when it holds
// cacheMaintainPacks packs or more, and reports whether it ran and how
// many refs it deleted. The caller holds the cache's lock.
func (j *codingJob) maintainCache(ctx context.Context, cache string) (deleted int, ran bool, err error) {
	ents, err := os.ReadDir(filepath.Join(cache, "objects", "pack"))
	if err != nil {
		return 0, false, err
	}
	packs := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".pack") {
			packs++
		}
	}
	if packs < cacheMaintainPacks {
		return 0, false, nil
	}
	out, err := j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: []string{"for-each-ref", "--sort=-creatordate",
		"--format=%(objectname) %(refname)", basesPrefix}})
	if err != nil {
		return 0, true, err
	}
	borrowed := j.x.borrowedBases(j.task.RepositoryID)
	var del strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		sha, ref, ok := strings.Cut(line, " ")
		if !ok || ref != basesPrefix+sha {
			return 0, true, errors.New("unexpected ref in the source cache")
		}
		if i < maxCacheHaves || borrowed[sha] {
			continue
		}
		del.WriteString("delete " + ref + " " + sha + "\n")
		deleted++
	}
	if deleted > 0 {
		if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: cache, Stdin: []byte(del.String()), Args: []string{"update-ref", "--stdin"}}); err != nil {
			return 0, true, err
		}
	}
	_, err = j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: []string{"repack", "-a", "-d", "-q", "--no-write-bitmap-index"}})
	return deleted, true, err
}

// fetchPrefix names a base fetch's quarantine beside the caches (the same
// filesystem, so its packs move in by rename); a killed fetch's is
// removed at startup.
const fetchPrefix = ".fetch-"

// storeBase adds the base bundle's pack (at packAt in file) to the cache
// and pins the base. The pack is indexed in a quarantine that reads the
// cache (gitx.Quarantine) with index-pack --strict: every object fsck'd
// on every git (git fetch of a bundle ignores transfer.fsckObjects before
// git 2.46), thin bases taken from the cache. The base's history must
// then be whole down to what the cache's refs reach (rev-list --objects
// base --not --alternate-refs: the bundle's prerequisites included);
// only then are the packs moved in and the ref set. A refused or failed
// bundle leaves nothing in the cache. The caller holds the cache's lock.
func (j *codingJob) storeBase(ctx context.Context, cache, file string, packAt int64) error {
	q, err := os.MkdirTemp(filepath.Dir(cache), fetchPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(q)
	repo := filepath.Join(q, "r.git")
	if err := gitx.Quarantine(repo, cache); err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(packAt, io.SeekStart); err != nil {
		return err
	}
	if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: repo, StdinFrom: f, Args: []string{"index-pack", "--strict", "--fix-thin", "--stdin"}}); err != nil {
		return err
	}
	if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"rev-list", "--objects", "--quiet", j.task.BaseSHA, "--not", "--alternate-refs"}}); err != nil {
		return err
	}
	if err := gitx.MovePacks(filepath.Join(repo, "objects", "pack"), filepath.Join(cache, "objects", "pack")); err != nil {
		return err
	}
	_, err = j.git.Run(ctx, gitx.Cmd{GitDir: cache, Args: []string{"update-ref", "--no-deref", basesPrefix + j.task.BaseSHA, j.task.BaseSHA}})
	return err
}

// sweepSourceCaches removes what killed fetches left under runtimeRoot's
// caches: quarantines (.fetch-*), half-made caches (.init-*), and git's
// temporary packs in each cache (tmp_pack_*, tmp_idx_*, tmp_rev_*). It is
// part of SweepRuntime, before any lane runs; it reports whether every
// such entry went (a Worker without caches has nothing to sweep).
func sweepSourceCaches(runtimeRoot string) bool {
	root := filepath.Join(runtimeRoot, sourcesDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil || !removeEntries(root, fetchPrefix, ".init-") {
		return false
	}
	ok := true
	for _, e := range ents {
		if e.IsDir() && strings.HasSuffix(e.Name(), ".git") {
			pack := filepath.Join(root, e.Name(), "objects", "pack")
			if _, err := os.Lstat(pack); err == nil {
				ok = removeEntries(pack, "tmp_pack_", "tmp_idx_", "tmp_rev_") && ok
			}
		}
	}
	return ok
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
// source.BaseRef at base. Its prerequisites are checked by storeBase's
// connectivity check: each must be a commit of the cache reachable from
// its refs (so its whole history is there). They are not only the haves:
// a base that merges a branch forked before the newest cached base names
// that fork point, an ancestor of a have. It returns the number of
// objects the pack's header announces and where the pack starts.
func checkBaseBundle(path, base string) (uint32, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	buf := make([]byte, gitx.MaxBundleHeaderBytes+gitx.MaxBundleLineBytes+8)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, 0, err
	}
	h, err := gitx.ParseBundleHeader(buf[:n])
	if err != nil {
		return 0, 0, err
	}
	if len(h.Refs) != 1 || h.Refs[0].SHA != base || h.Refs[0].Name != source.BaseRef {
		return 0, 0, errors.New("base bundle names another ref")
	}
	// "PACK", version, object count (git's pack header, big-endian).
	if n < h.Size+12 {
		return 0, 0, errors.New("base bundle's pack is truncated")
	}
	return binary.BigEndian.Uint32(buf[h.Size+8 : h.Size+12]), int64(h.Size), nil
}
