package worker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// earlierCandidates runs n successful attempts (jobs "old0"… with attempt
// "att1") and returns their candidate refs and SHAs.
func earlierCandidates(t *testing.T, f *codingFixture, n int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range n {
		l := f.lease(wire.CodingTask{Instruction: "write old.txt " + string(rune('a'+i))}, nil)
		l.JobID = "old" + string(rune('0'+i))
		r := f.run(l)
		if !r.Succeeded {
			t.Fatalf("earlier attempt %d: %+v", i, r)
		}
		out[CandidateRef(l.JobID, l.AttemptID)] = r.CandidateSHA
	}
	return out
}

// expectViolation checks a refs_changed workspace_violation.
func expectViolation(t *testing.T, f *codingFixture, r Report) {
	t.Helper()
	if r.Succeeded || r.Code != wire.FailureWorkspaceViolation {
		t.Fatalf("report %+v", r)
	}
	recs := f.records(evidence.Options{})
	if len(recs) != 1 {
		t.Fatalf("%d batches", len(recs))
	}
	if last := recs[0][len(recs[0])-1]; last.Phase != evidence.PhaseWorkspaceValidation || last.Reason != evidence.ReasonRefsChanged {
		t.Fatalf("record %s/%s", last.Phase, last.Reason)
	}
	f.assertClean()
}

// candidatesSurviveGC checks that every candidate still names its commit
// after reflog expiry and garbage collection.
func candidatesSurviveGC(t *testing.T, f *codingFixture, cands map[string]string) {
	t.Helper()
	gitT(t, f.repo, "reflog", "expire", "--expire=now", "--all")
	gitT(t, f.repo, "gc", "-q", "--prune=now")
	for ref, sha := range cands {
		if got := gitT(t, f.repo, "rev-parse", ref); got != sha {
			t.Fatalf("%s names %s, want %s", ref, got, sha)
		}
		gitT(t, f.repo, "cat-file", "-e", sha+"^{commit}")
	}
}

// Earlier jobs' candidate refs are protected like every other ref: a
// plugin that deletes or moves one (loose or packed) is a violation, and
// the ref is restored exactly.
func TestCodingProtectsEarlierCandidateRefs(t *testing.T) {
	plugin := buildEditPlugin(t)
	cases := []struct {
		name        string
		pack        bool
		instruction func(f *codingFixture, old string) string
	}{
		{"deleted", false, func(_ *codingFixture, old string) string { return "gitrm " + old }},
		{"moved", false, func(f *codingFixture, old string) string { return "gitfile " + old + " " + f.side }},
		{"packed refs emptied", true, func(*codingFixture, string) string { return "gitfile packed-refs # pack-refs with: peeled" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newCodingFixture(t, plugin)
			cands := earlierCandidates(t, f, 2)
			if tc.pack {
				gitT(t, f.repo, "pack-refs", "--all", "--prune")
			}
			refs, _, _ := sharedView(t, f)
			old := CandidateRef("old0", "att1")
			r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a\n" + tc.instruction(f, old)}, nil))
			expectViolation(t, f, r)
			if refs2, _, _ := sharedView(t, f); refs2 != refs {
				t.Fatalf("refs not restored:\n%s\nwant\n%s", refs2, refs)
			}
			if _, err := os.Lstat(filepath.Join(f.repo, ".git", filepath.FromSlash(CandidateRef("job1", "att1")))); err == nil {
				t.Fatal("the failed attempt left its candidate ref")
			}
			candidatesSurviveGC(t, f, cands)
		})
	}
}

// concurrentPair starts attempt A (job "jobA") on its own goroutine with
// the given plugin script around a rendezvous: A's plugin signals once it
// runs, the test then runs attempt B ("jobB") to completion, and A's
// plugin continues after B. It returns A's and B's reports and A's
// evidence records.
func concurrentPair(t *testing.T, f *codingFixture, beforeB, afterB string) (Report, Report, []evidence.Record) {
	t.Helper()
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	running, resume := filepath.Join(dir, "running"), filepath.Join(dir, "resume")
	for _, p := range []string{running, resume} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		r    Report
		recs []json.RawMessage
	}
	done := make(chan result, 1)
	la := f.lease(wire.CodingTask{Instruction: beforeB + "signal " + running + "\nawait " + resume + "\n" + afterB}, nil)
	la.JobID = "jobA"
	go func() {
		var recs []json.RawMessage
		r := x.Execute(context.Background(), &Attempt{Lease: la, Bind: func(_ context.Context, n int, b []json.RawMessage) error {
			if n == 1 {
				recs = b
			}
			return nil
		}})
		done <- result{r, recs}
	}()
	// Opening the pipe for reading returns once A's plugin opened it for
	// writing: A holds the baseline and its plugin runs.
	rf, err := os.Open(running)
	if err != nil {
		t.Fatal(err)
	}
	rf.Close()
	lb := f.lease(wire.CodingTask{Instruction: "write b.txt b"}, nil)
	lb.JobID = "jobB"
	rb := x.Execute(context.Background(), &Attempt{Lease: lb, Bind: func(context.Context, int, []json.RawMessage) error { return nil }})
	wf, err := os.OpenFile(resume, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	wf.Close()
	a := <-done
	var recs []evidence.Record
	for _, raw := range a.recs {
		var rec evidence.Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return a.r, rb, recs
}

// A candidate ref the Worker creates for attempt B while attempt A runs
// is neither A's violation nor undone by A's restore; deleting it is.
func TestCodingConcurrentCandidateRefs(t *testing.T) {
	plugin := buildEditPlugin(t)
	refA, refB := CandidateRef("jobA", "att1"), CandidateRef("jobB", "att1")

	t.Run("both candidates survive", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		cands := earlierCandidates(t, f, 1)
		ra, rb, _ := concurrentPair(t, f, "write a.txt a\n", "")
		if !ra.Succeeded || !rb.Succeeded {
			t.Fatalf("A %+v, B %+v", ra, rb)
		}
		cands[refA], cands[refB] = ra.CandidateSHA, rb.CandidateSHA
		candidatesSurviveGC(t, f, cands)
		f.assertClean()
	})

	t.Run("deleting the other attempt's new candidate is a violation and is undone", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		ra, rb, recs := concurrentPair(t, f, "write a.txt a\n", "gitrm "+refB+"\n")
		if !rb.Succeeded || ra.Succeeded || ra.Code != wire.FailureWorkspaceViolation {
			t.Fatalf("A %+v, B %+v", ra, rb)
		}
		if last := recs[len(recs)-1]; last.Reason != evidence.ReasonRefsChanged {
			t.Fatalf("A's record %s", last.Reason)
		}
		if got := gitT(t, f.repo, "for-each-ref", "--format=%(objectname) %(refname)", CandidatePrefix); got != rb.CandidateSHA+" "+refB {
			t.Fatalf("candidate refs:\n%s", got)
		}
	})

	t.Run("moving the other attempt's new candidate is a violation and is undone", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		ra, rb, _ := concurrentPair(t, f, "write a.txt a\n", "gitfile "+refB+" "+f.side+"\n")
		if !rb.Succeeded || ra.Code != wire.FailureWorkspaceViolation {
			t.Fatalf("A %+v, B %+v", ra, rb)
		}
		if got := gitT(t, f.repo, "rev-parse", refB); got != rb.CandidateSHA {
			t.Fatalf("B's ref %s, want %s", got, rb.CandidateSHA)
		}
	})

	t.Run("a bogus candidate is a violation and is deleted, the other attempt's kept", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		bogus := CandidateRef("made-up", "att9")
		ra, rb, _ := concurrentPair(t, f, "write a.txt a\n", "gitfile "+bogus+" "+f.side+"\n")
		if !rb.Succeeded || ra.Code != wire.FailureWorkspaceViolation {
			t.Fatalf("A %+v, B %+v", ra, rb)
		}
		if got := gitT(t, f.repo, "for-each-ref", "--format=%(objectname) %(refname)", CandidatePrefix); got != rb.CandidateSHA+" "+refB {
			t.Fatalf("candidate refs:\n%s", got)
		}
	})

	t.Run("a bogus candidate made before the other attempt's restore is gone", func(t *testing.T) {
		// B's restore puts the shared baseline back, A's change included
		// (concurrent attempts share the state saved before the first of
		// them started), so A's own validation no longer sees it.
		f := newCodingFixture(t, plugin)
		bogus := CandidateRef("made-up", "att9")
		ra, rb, _ := concurrentPair(t, f, "write a.txt a\ngitfile "+bogus+" "+f.side+"\n", "")
		if !rb.Succeeded || !ra.Succeeded {
			t.Fatalf("A %+v, B %+v", ra, rb)
		}
		want := ra.CandidateSHA + " " + refA + "\n" + rb.CandidateSHA + " " + refB
		if got := gitT(t, f.repo, "for-each-ref", "--format=%(objectname) %(refname)", CandidatePrefix); got != want {
			t.Fatalf("candidate refs:\n%s", got)
		}
	})
}
