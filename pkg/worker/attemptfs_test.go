package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// sparse makes p a 1 TiB sparse file.
func sparse(t *testing.T, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// Every read of an agent-writable path is bounded and follows nothing: a
// huge sparse file, a symbolic link out, a FIFO and a directory in a
// file's place are refused (or hashed as what they are), never read
// through, never blocked on.
func TestAttemptFilesBoundedNoFollow(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "token"), []byte("secret\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ok\n"), 0o644)
	sparse(t, filepath.Join(dir, "big"))
	os.Symlink(filepath.Join(outside, "token"), filepath.Join(dir, "link"))
	os.Symlink(outside, filepath.Join(dir, "linkdir"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)

	if b, err := readAttemptFile(filepath.Join(dir, "HEAD"), 16); err != nil || string(b) != "ok\n" {
		t.Fatalf("HEAD: %q %v", b, err)
	}
	for name, want := range map[string]error{
		"big": errTooLarge, "link": errSymlink, "fifo": errNotRegular, "sub": errNotRegular,
		"absent": fs.ErrNotExist, "linkdir/token": errSymlink,
	} {
		if b, err := readAttemptFile(filepath.Join(dir, name), maxGitFile); !errors.Is(err, want) || b != nil {
			t.Errorf("%s: %q %v, want %v", name, b, err, want)
		}
	}
	d, err := openDirNoFollow(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if b, err := readBeneath(d, "linkdir/token", maxGitFile); !errors.Is(err, errNotDirectory) || b != nil {
		t.Errorf("read through a symlinked directory: %q %v", b, err)
	}

	// Digests hash what each entry is, without reading it: a change of
	// type or size shows, nothing blocks, nothing is followed.
	before, err := digestFiles(dir, "HEAD", "big", "link", "fifo", "sub", "absent", "linkdir/token")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "token"), []byte("changed\n"), 0o600)
	if again, err := digestFiles(dir, "HEAD", "big", "link", "fifo", "sub", "absent", "linkdir/token"); err != nil || again != before {
		t.Fatalf("a digest read through a link: %v", err)
	}
	if err := os.Truncate(filepath.Join(dir, "big"), 1<<41); err != nil {
		t.Fatal(err)
	}
	if again, _ := digestFiles(dir, "big"); again == before {
		t.Fatal("an oversized file's size does not show")
	}
	if _, err := digestDir(dir); err != nil {
		t.Fatal(err)
	}
	if d, err := digestDir(filepath.Join(dir, "linkdir")); err != nil || d != errSymlink.Error() {
		t.Fatalf("a symlinked directory was read: %q %v", d, err)
	}
}

// A plugin that makes its HEAD, a hook, the config or a file of its tree
// a 1 TiB sparse file fails its attempt (workspace_violation), cleanly:
// the Worker reads none of them, nor lets git read the tree's (on the old
// code the HEAD and the hook killed the Worker: out of memory).
func TestCodingSparseMetadata(t *testing.T) {
	plugin := buildEditPlugin(t)
	for _, c := range []struct {
		name, instruction string
		reason            evidence.Reason
	}{
		{"HEAD", "write a.txt a\nsparse admin HEAD", evidence.ReasonHeadMoved},
		{"hook", "write a.txt a\nsparse common hooks/post-checkout", evidence.ReasonConfigChanged},
		{"config", "write a.txt a\nsparse common config", evidence.ReasonConfigChanged},
		{"tree", "write a.txt a\nsparse tree big.bin", evidence.ReasonPathEscape},
		{"tree-total", "write a.txt a" + sparseFiles(5, maxStageFile), evidence.ReasonPathEscape},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newCodingFixture(t, plugin)
			r := f.run(f.lease(wire.CodingTask{Instruction: c.instruction}, nil))
			f.expectFailure(r, wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, c.reason)
		})
	}
}

// Cleanup never follows what the agent shaped: a worktree swapped for a
// symbolic link to another repository, and an administrative directory
// whose entries lead out, are removed as links; what they point at stays.
func TestRemoveWorktreeFollowsNothing(t *testing.T) {
	f := newCodingFixture(t, "/bin/true")
	outside := t.TempDir()
	other := filepath.Join(outside, "repo", ".git")
	if err := os.MkdirAll(filepath.Join(other, "refs"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	container := filepath.Join(f.cfg.WorktreeRoot, "wt-x")
	wt := filepath.Join(container, "tree")
	gitT(t, f.repo, "worktree", "add", "-q", "--detach", wt, f.base)
	admin, ok := worktreeAdmin(wt, filepath.Join(f.repo, ".git"))
	if !ok {
		t.Fatal("no admin dir")
	}
	// The agent's last moves: its tree becomes a link to the other
	// repository, its admin dir's entries links out.
	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Dir(other), wt)
	os.Remove(filepath.Join(admin, "gitdir"))
	os.Symlink(other, filepath.Join(admin, "gitdir"))
	os.Symlink(filepath.Join(other, "refs"), filepath.Join(admin, "refs"))
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		t.Fatal(err)
	}
	j := &codingJob{x: x, task: wire.CodingTask{RepositoryID: "demo"}, container: container, wt: wt, admin: admin,
		repo: repoPaths{path: f.repo, common: filepath.Join(f.repo, ".git")}}
	if err := j.cleanup(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{container, admin} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s remains", p)
		}
	}
	for _, p := range []string{filepath.Join(other, "HEAD"), filepath.Join(other, "refs")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("cleanup removed what a link pointed at: %v", err)
		}
	}
}

// A public-source attempt's refs are compared as files: a ref added or
// moved shows, the empty directories git leaves after deleting one do not.
func TestDigestRefs(t *testing.T) {
	f := newCodingFixture(t, "/bin/true")
	gd := filepath.Join(f.repo, ".git")
	before, err := digestRefs(gd)
	if err != nil {
		t.Fatal(err)
	}
	gitT(t, f.repo, "update-ref", "refs/agent-forge/candidates/j/a", f.side)
	if d, _ := digestRefs(gd); d == before {
		t.Fatal("an added ref does not show")
	}
	gitT(t, f.repo, "update-ref", "-d", "refs/agent-forge/candidates/j/a")
	if d, _ := digestRefs(gd); d != before {
		t.Fatal("a deleted ref's empty directories show")
	}
	gitT(t, f.repo, "update-ref", "refs/heads/main", f.side)
	if d, _ := digestRefs(gd); d == before {
		t.Fatal("a moved ref does not show")
	}
}

// sparseFiles is the instruction lines making n sparse files f<i>.bin of
// size bytes in the tree.
func sparseFiles(n int, size int64) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "\nsparse tree f%d.bin %d", i, size)
	}
	return b.String()
}

// What git would not read does not count: a 1 TiB sparse file, and five
// files at the file bound (past the total), that the tree's .gitignore
// covers leave the attempt a candidate without them.
func TestCodingSparseIgnored(t *testing.T) {
	plugin := buildEditPlugin(t)
	for name, instruction := range map[string]string{
		"huge":  "write .gitignore *.bin\nwrite a.txt a\nsparse tree big.bin",
		"total": "write .gitignore *.bin\nwrite a.txt a" + sparseFiles(5, maxStageFile),
	} {
		t.Run(name, func(t *testing.T) {
			f := newCodingFixture(t, plugin)
			r := f.run(f.lease(wire.CodingTask{Instruction: instruction}, nil))
			if !r.Succeeded {
				t.Fatalf("report %+v", r)
			}
			if files := gitT(t, f.repo, "ls-tree", "-r", "--name-only", r.CandidateSHA); strings.Contains(files, ".bin") || !strings.Contains(files, "a.txt") {
				t.Fatalf("candidate files:\n%s", files)
			}
		})
	}
}

// The Gate layout, sandboxed: the attempt repository's HEAD, config or a
// hook, or a file of the tree, made a 1 TiB sparse file fails its job
// cleanly (workspace_violation, one attempt), and the Worker runs the
// next job.
func TestPublicSourceSparseMetadata(t *testing.T) {
	w := newPublicWorld(t, 1, "")
	ev := w.startPublicWorker(w.workerConfig("worker-1", 1), testToken)
	waitEvent(t, ev, EventConnected)
	base := w.advance(0)
	for _, in := range []string{"sparse admin HEAD", "sparse admin config", "sparse admin hooks/pre-commit", "sparse tree big.bin"} {
		j := w.waitJob(w.submit(base, "write a.txt a\n"+in))
		if j.Job.Status != "failed" || j.Job.FailureCode != wire.FailureWorkspaceViolation || j.Job.AttemptCount != 1 {
			t.Errorf("%s: job %+v", in, j.Job)
		}
	}
	if j := w.waitJob(w.submit(base, "write a.txt next")); j.Job.Status != "succeeded" {
		t.Fatalf("the next job: %+v", j.Job)
	}
}

// The private index is copied like every attempt file is read: a link
// in the index's place is refused (never followed), a sparse 1 TiB index
// is refused before a byte is copied, a plain one is copied, dated a
// second after the moment it notes.
func TestSavePrivateIndexBounded(t *testing.T) {
	admin, outside := t.TempDir(), t.TempDir()
	j := &codingJob{admin: admin, gitHome: t.TempDir()}
	index := filepath.Join(admin, "index")
	os.WriteFile(filepath.Join(outside, "token"), []byte("outside\n"), 0o600)
	os.Symlink(filepath.Join(outside, "token"), index)
	if err := j.savePrivateIndex(); !errors.Is(err, errSymlink) {
		t.Fatalf("an index that is a link: %v", err)
	}
	os.Remove(index)
	sparse(t, index)
	if err := j.savePrivateIndex(); !errors.Is(err, errTooLarge) {
		t.Fatalf("a sparse 1 TiB index: %v", err)
	}
	os.Remove(index)
	os.WriteFile(index, []byte("DIRC index\n"), 0o644)
	if err := j.savePrivateIndex(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(j.privateIndex())
	fi, _ := os.Stat(j.privateIndex())
	if err != nil || string(b) != "DIRC index\n" || !fi.ModTime().Equal(time.Unix(0, j.indexedAt).Add(time.Second)) {
		t.Fatalf("copy %q %v %v", b, err, fi.ModTime())
	}
}

// A plugin's run directory swapped for a FIFO (and back) while the
// Worker checks it is never opened as the FIFO (which would block the
// Worker): 2000 checks against a swapper return.
func TestRunDirUnchangedNeverBlocks(t *testing.T) {
	d := &runDirs{root: t.TempDir()}
	r, err := d.take()
	if err != nil {
		t.Fatal(err)
	}
	fifo := r.path + ".fifo"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	wg := survivor(stop, func() { renameExchange(r.path, fifo) })
	defer func() { close(stop); wg.Wait() }()
	done := make(chan struct{})
	go func() {
		for range 2000 {
			unchanged(r)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("checking the run directory blocked on a FIFO swapped into its place")
	}
}
