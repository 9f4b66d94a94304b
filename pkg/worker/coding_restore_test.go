package worker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// sharedView is what an operator sees of the registered repository: every
// ref with its value, the config bytes and the hook names.
func sharedView(t *testing.T, f *codingFixture) (refs, config string, hooks []string) {
	t.Helper()
	refs = gitT(t, f.repo, "for-each-ref", "--format=%(objectname) %(symref) %(refname)")
	b, err := os.ReadFile(filepath.Join(f.repo, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(f.repo, ".git", "hooks"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		hooks = append(hooks, e.Name())
	}
	return refs, string(b), hooks
}

func TestCodingRestoresSharedRepository(t *testing.T) {
	plugin := buildEditPlugin(t)

	violations := []struct {
		name        string
		instruction func(f *codingFixture) string
		reason      evidence.Reason
	}{
		{"new ref", func(f *codingFixture) string { return "gitfile refs/heads/sneaky " + f.side }, evidence.ReasonRefsChanged},
		{"new tag", func(f *codingFixture) string { return "gitfile refs/tags/v9 " + f.side }, evidence.ReasonRefsChanged},
		{"moved main", func(f *codingFixture) string { return "gitfile refs/heads/main " + f.side }, evidence.ReasonRefsChanged},
		{"moved other branch", func(f *codingFixture) string { return "gitfile refs/heads/side " + f.base }, evidence.ReasonRefsChanged},
		{"fsmonitor", func(*codingFixture) string { return "gitfile config [core] fsmonitor = /bin/false" }, evidence.ReasonConfigChanged},
		{"hooksPath", func(*codingFixture) string { return "gitfile config [core] hooksPath = /tmp" }, evidence.ReasonConfigChanged},
		{"worktree config", func(*codingFixture) string { return "gitfile config.worktree [core] fsmonitor = /bin/false" }, evidence.ReasonConfigChanged},
		{"hook", func(*codingFixture) string { return "gitfile hooks/pre-commit #!/bin/sh" }, evidence.ReasonConfigChanged},
		// Left in place, this would make the next attempt's b.txt invisible to git add.
		{"info exclude", func(*codingFixture) string { return "gitfile info/exclude b.txt" }, evidence.ReasonConfigChanged},
		{"info grafts", func(f *codingFixture) string { return "gitfile info/grafts " + f.base }, evidence.ReasonConfigChanged},
		// A commondir file in the common dir redirects the repository.
		{"commondir", func(f *codingFixture) string { return "gitfile commondir " + f.repo + "/.git" }, evidence.ReasonConfigChanged},
		{"sparse checkout", func(*codingFixture) string { return "gitfile info/sparse-checkout /a.txt" }, evidence.ReasonConfigChanged},
	}
	for _, tc := range violations {
		t.Run(tc.name, func(t *testing.T) {
			f := newCodingFixture(t, plugin)
			refs, config, hooks := sharedView(t, f)
			eb, _ := os.ReadFile(filepath.Join(f.repo, ".git", "info", "exclude"))
			excludeBefore := string(eb)
			r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a\n" + tc.instruction(f)}, nil))
			f.expectFailure(r, wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, tc.reason)
			refs2, config2, hooks2 := sharedView(t, f)
			if refs2 != refs {
				t.Fatalf("refs not restored:\n%s\nwant\n%s", refs2, refs)
			}
			if config2 != config {
				t.Fatalf("config not restored:\n%s", config2)
			}
			if len(hooks2) != len(hooks) {
				t.Fatalf("hooks not restored: %v", hooks2)
			}
			for _, name := range []string{"config.worktree", "info/grafts", "commondir", "info/sparse-checkout"} {
				if _, err := os.Lstat(filepath.Join(f.repo, ".git", name)); err == nil {
					t.Fatalf("%s left behind", name)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(f.repo, ".git", "info", "exclude")); string(b) != excludeBefore {
				t.Fatalf("info/exclude not restored: %q", b)
			}
			// The repository stays in service: the next attempt succeeds.
			if r := f.run(f.lease(wire.CodingTask{Instruction: "write b.txt b"}, nil)); !r.Succeeded {
				t.Fatalf("next attempt %+v", r)
			}
		})
	}

	t.Run("a failed plugin's changes are undone too", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		refs, config, _ := sharedView(t, f)
		r := f.run(f.lease(wire.CodingTask{Instruction: "gitfile refs/heads/main " + f.side +
			"\ngitfile config [core] hooksPath = /tmp\nfail"}, nil))
		f.expectFailure(r, CodePluginFailed, evidence.PhasePlugin, evidence.ReasonPluginFailed)
		if refs2, config2, _ := sharedView(t, f); refs2 != refs || config2 != config {
			t.Fatalf("not restored:\n%s\n%s", refs2, config2)
		}
	})

	t.Run("a plugin-made candidate ref is a violation and is deleted", func(t *testing.T) {
		for _, ref := range []string{CandidateRef("made-up", "att9"), CandidateRef("job1", "att1")} {
			f := newCodingFixture(t, plugin)
			refs, _, _ := sharedView(t, f)
			// A made-up job/attempt, and the attempt's own ref made early.
			r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a\ngitfile " + ref + " " + f.side}, nil))
			f.expectFailure(r, wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, evidence.ReasonRefsChanged)
			if refs2, _, _ := sharedView(t, f); refs2 != refs {
				t.Fatalf("refs not restored:\n%s\nwant\n%s", refs2, refs)
			}
		}
	})

	t.Run("an unrestorable repository leaves service", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv),
			Now: func() time.Time { return time.Unix(1_700_000_000, 0) }})
		if err != nil {
			t.Fatal(err)
		}
		var batches [][]json.RawMessage
		bind := func(_ context.Context, _ int, recs []json.RawMessage) error {
			batches = append(batches, recs)
			return nil
		}
		// A stale lock file makes resetting main impossible.
		r := x.Execute(context.Background(), &Attempt{Lease: f.lease(wire.CodingTask{Instruction: "write a.txt a\ngitfile refs/heads/main.lock x" +
			"\ngitfile refs/heads/main " + f.side}, nil), Bind: bind})
		// Terminal and named for the cause: a retry would meet a repository
		// this Worker refuses.
		if d, _ := wire.DispositionOf(r.Code); r.Succeeded || r.Code != wire.FailureRepositoryOutOfService || d != wire.DispositionTerminal {
			t.Fatalf("report %+v", r)
		}
		os.Remove(filepath.Join(f.repo, ".git", "refs", "heads", "main.lock"))
		batches = nil
		r = x.Execute(context.Background(), &Attempt{Lease: f.lease(wire.CodingTask{Instruction: "write a.txt a"}, nil), Bind: bind})
		if r.Succeeded || r.Code != wire.FailureRepositoryOutOfService {
			t.Fatalf("out-of-service repository: report %+v", r)
		}
		var rec evidence.Record
		if len(batches) != 1 || json.Unmarshal(batches[0][0], &rec) != nil ||
			rec.Phase != evidence.PhasePreparation || rec.Reason != evidence.ReasonGitFailed {
			t.Fatalf("batches %s", batches)
		}
		// A fresh executor (a restarted Worker) serves it again.
		gitT(t, f.repo, "update-ref", "refs/heads/main", f.base)
		if r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a"}, nil)); !r.Succeeded {
			t.Fatalf("after repair %+v", r)
		}
	})
}
