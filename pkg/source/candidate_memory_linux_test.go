package source

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// A candidate of 194 bytes whose one delta declares 1 GiB (a 64 KiB blob,
// then 1 GiB minus it: exactly candidate_unpacked_bytes, so the scan lets
// it through) is refused memory_exceeded by index-pack's memory bound at
// once, stores nothing, and no git of the upload grew past the bound.
// Without the bound, index-pack resolved it at 1.2 GiB resident for 6 s,
// and the refusal came after (malformed_bundle: the announced commit is
// not in the pack).
func TestCandidateMemoryBound(t *testing.T) {
	root := realDir(t)
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is required")
	}
	if git, err = filepath.EvalSymlinks(git); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(root, "public")
	if err := os.Mkdir(pub, 0o700); err != nil {
		t.Fatal(err)
	}
	work, prepared := filepath.Join(root, "work"), filepath.Join(pub, "prepared.git")
	hostGit(t, root, "init", "-q", "-b", "main", work)
	hostGit(t, root, "init", "-q", "--bare", prepared)
	hostGit(t, work, "commit", "-q", "--allow-empty", "-m", "base")
	base := hostGit(t, work, "rev-parse", "HEAD")
	hostGit(t, work, "push", "-q", prepared, "main")
	pack, err := os.ReadFile("../gitx/testdata/pack/delta-1g.pack")
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.Repeat("c", 40)
	ref := "refs/agent-forge/candidates/job/a0"
	path := filepath.Join(root, "bomb.bundle")
	if err := os.WriteFile(path, append(gitx.FormatBundleHeader(gitx.BundleHeader{Prerequisites: []gitx.BundlePrerequisite{{SHA: base}},
		Refs: []gitx.BundleRef{{SHA: commit, Name: ref}}}), pack...), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := New(pub, git, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	packs := func() []string { m, _ := filepath.Glob(filepath.Join(prepared, "objects", "pack", "*")); return m }
	packs0, refs0 := packs(), hostGit(t, prepared, "for-each-ref")

	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before); err != nil || before.Maxrss >= 128<<10 {
		t.Fatalf("children's peak RSS before: %d KiB %v (cannot measure the bound)", before.Maxrss, err)
	}
	forge := "Agent Forge <forge@example.invalid>"
	err = p.StoreCandidate(context.Background(), Repository{ID: "app"},
		Candidate{Dir: prepared, Base: base, Commit: commit, Tree: strings.Repeat("d", 40), Ref: ref, Author: forge, Committer: forge},
		path, func() error { return nil })
	var be *BundleError
	if !errors.As(err, &be) || be.Reason != ReasonBundleMemory {
		t.Fatalf("a 1 GiB delta: %v, want %s", err, ReasonBundleMemory)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after); err != nil || after.Maxrss<<10 >= DefaultCandidateGitMemoryBytes {
		t.Fatalf("the upload's git peaked at %d KiB %v, past the bound", after.Maxrss, err)
	}
	t.Logf("git children's peak RSS: %d KiB before the upload, %d KiB after", before.Maxrss, after.Maxrss)
	if now := packs(); strings.Join(now, " ") != strings.Join(packs0, " ") {
		t.Fatalf("packs %v -> %v", packs0, now)
	}
	if refs := hostGit(t, prepared, "for-each-ref"); refs != refs0 {
		t.Fatalf("refs %q -> %q", refs0, refs)
	}
	if left, _ := filepath.Glob(filepath.Join(pub, scratchPrefix+"*")); len(left) != 0 {
		t.Fatalf("scratch left: %v", left)
	}
}
