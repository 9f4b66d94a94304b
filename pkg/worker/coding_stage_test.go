package worker

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// raceRounds is how many attempts a race test runs: a survivor that wins
// 5 % of them would win at least once with probability 1-0.95^60 > 95 %.
const raceRounds = 60

// survivor calls flip in a loop until stop is closed: a process outliving
// the plugin that keeps changing what the agent may write.
func survivor(stop chan struct{}, flip func()) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			flip()
			time.Sleep(20 * time.Microsecond)
		}
	}()
	return &wg
}

// exchange swaps two paths atomically (renameat2 RENAME_EXCHANGE).
func exchange(a, b string) {
	pa, _ := syscall.BytePtrFromString(a)
	pb, _ := syscall.BytePtrFromString(b)
	const renameExchange = 2
	cwd := atFDCWD
	syscall.Syscall6(316, uintptr(cwd), uintptr(unsafe.Pointer(pa)), uintptr(cwd), uintptr(unsafe.Pointer(pb)), renameExchange, 0)
}

// The Worker's git never reads the attempt's git metadata (DECISIONS 21):
// a survivor that keeps pointing the worktree's commondir at a repository
// whose config defines a clean filter the tree's .gitattributes names,
// racing validation, never gets that filter run, in raceRounds attempts.
func TestStagingNeverRunsTheAgentsFilter(t *testing.T) {
	f := newCodingFixture(t, buildEditPlugin(t))
	marker := filepath.Join(f.root, "filter-ran")
	evil := filepath.Join(f.root, "evil.git")
	gitT(t, f.root, "clone", "-q", "--bare", f.repo, evil)
	gitT(t, evil, "config", "core.bare", "false")
	cfg, _ := os.ReadFile(filepath.Join(evil, "config"))
	cfg = append(cfg, fmt.Sprintf("[filter \"evil\"]\n\tclean = touch %s && cat\n\trequired = true\n", marker)...)
	if err := os.WriteFile(filepath.Join(evil, "config"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	// The survivor keeps pointing every worktree's commondir at the evil
	// repository and back, at random moments (0–2 ms apart): a snapshot
	// that reads the good one and a git that then reads the evil one is
	// what it waits for.
	good := map[string][]byte{}
	codes := map[string]int{}
	stop := make(chan struct{})
	wg := survivor(stop, func() {
		dirs, _ := filepath.Glob(filepath.Join(f.repo, ".git", "worktrees", "*"))
		for _, d := range dirs {
			cd := filepath.Join(d, "commondir")
			if _, ok := good[d]; !ok {
				b, err := os.ReadFile(cd)
				if err != nil {
					continue
				}
				good[d] = b
			}
			for _, b := range [][]byte{[]byte(evil + "\n"), good[d]} {
				if os.WriteFile(cd+".tmp", b, 0o644) == nil {
					os.Rename(cd+".tmp", cd)
				}
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			}
		}
	})
	for i := 0; i < raceRounds; i++ {
		l := f.lease(wire.CodingTask{Instruction: fmt.Sprintf("write a.txt %d\nwrite .gitattributes * filter=evil", i)}, nil)
		l.JobID = fmt.Sprintf("job%d", i)
		r := f.run(l)
		codes[r.Code]++
	}
	close(stop)
	wg.Wait()
	t.Logf("tried=%d outcomes %v", raceRounds, codes)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the agent's clean filter ran in the Worker's git")
	}
}

// Staging never reads through the workspace: a survivor that keeps
// exchanging a directory of the tree with a symbolic link to an outside
// directory, racing validation, never gets the outside file into a
// candidate, in raceRounds attempts.
func TestStagingNeverFollowsTheTree(t *testing.T) {
	f := newCodingFixture(t, buildEditPlugin(t))
	outside := t.TempDir()
	const secret = "OUTSIDE-TOKEN-4711"
	os.WriteFile(filepath.Join(outside, "token"), []byte(secret+"\n"), 0o600)
	stop := make(chan struct{})
	wg := survivor(stop, func() {
		trees, _ := filepath.Glob(filepath.Join(f.cfg.WorktreeRoot, "wt-*", "tree"))
		for _, tr := range trees {
			alt, alt2 := filepath.Join(filepath.Dir(tr), "alt"), filepath.Join(filepath.Dir(tr), "alt2")
			for _, a := range []string{alt, alt2} {
				if _, err := os.Lstat(a); err != nil {
					os.Symlink(outside, a)
				}
			}
			exchange(filepath.Join(tr, "sub"), alt) // a directory of the tree
			exchange(filepath.Join(tr, "sub"), alt)
			exchange(tr, alt2) // the whole tree
			exchange(tr, alt2)
		}
	})
	for i := 0; i < raceRounds; i++ {
		l := f.lease(wire.CodingTask{Instruction: fmt.Sprintf("write sub/token inside %d", i)}, nil)
		l.JobID = fmt.Sprintf("job%d", i)
		f.run(l)
	}
	close(stop)
	wg.Wait()
	refs := gitT(t, f.repo, "for-each-ref", "--format=%(refname)", CandidatePrefix)
	for _, ref := range strings.Fields(refs) {
		out, _ := exec.Command("git", "-C", f.repo, "grep", "-c", "-e", secret, ref).Output()
		if len(out) > 0 {
			t.Fatalf("candidate %s holds the outside file", ref)
		}
	}
	t.Logf("%d candidates", len(strings.Fields(refs)))
}
