package worker

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// exchange swaps two paths atomically (renameExchange).
func exchange(a, b string) { renameExchange(a, b) }

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
