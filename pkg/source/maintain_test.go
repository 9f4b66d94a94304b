package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// CandidateRefs hands the refs over a page at a time, every valid one
// exactly once; a line too long to be a candidate ref and refs that are
// not candidate refs are skipped; an error of the callee stops it.
func TestCandidateRefsPages(t *testing.T) {
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
	p, err := New(pub, git, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := Repository{ID: "app", URL: testURL}
	dir := p.Dir(r)
	hostGit(t, root, "init", "-q", "--bare", dir)
	work := filepath.Join(root, "work")
	hostGit(t, root, "init", "-q", "-b", "main", work)
	hostGit(t, work, "commit", "-q", "--allow-empty", "-m", "base")
	base := hostGit(t, work, "rev-parse", "HEAD")
	hostGit(t, work, "push", "-q", dir, "main")
	const n = 2*candidatePage + 1
	lines := []string{
		base + " refs/agent-forge/candidates/" + strings.Repeat("j", 5000) + "/a",
		base + " refs/agent-forge/candidates/job.x/a",
		base + " refs/heads/main",
	}
	for i := range n {
		lines = append(lines, fmt.Sprintf("%s refs/agent-forge/candidates/job%05d/a", base, i))
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][41:] < lines[j][41:] })
	if err := os.WriteFile(filepath.Join(dir, "packed-refs"), []byte("# pack-refs with: peeled fully-peeled sorted \n"+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := hostGit(t, dir, "for-each-ref", "--count=1", "--format=%(refname)", "refs/agent-forge/candidates/j"+strings.Repeat("j", 4999)+"/"); !strings.HasSuffix(got, "/a") {
		t.Fatalf("git does not list the long ref: %q", got)
	}
	var sizes []int
	seen := map[string]bool{}
	err = p.CandidateRefs(context.Background(), r, func(page []CandidateRef) error {
		sizes = append(sizes, len(page))
		for _, ref := range page {
			if seen[ref.Name] || ref.Commit != base || ref.Name != "refs/agent-forge/candidates/"+ref.JobID+"/a" {
				t.Fatalf("listed %+v", ref)
			}
			seen[ref.Name] = true
		}
		return nil
	})
	if err != nil || len(seen) != n || fmt.Sprint(sizes) != fmt.Sprint([]int{candidatePage, candidatePage, 1}) {
		t.Fatalf("pages %v, %d refs, %v", sizes, len(seen), err)
	}
	stop := errors.New("stop")
	calls := 0
	if err := p.CandidateRefs(context.Background(), r, func([]CandidateRef) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("stopped listing: %v after %d pages", err, calls)
	}
	if left, _ := filepath.Glob(filepath.Join(pub, scratchPrefix+"*")); len(left) != 0 {
		t.Fatalf("listing files left: %v", left)
	}
}
