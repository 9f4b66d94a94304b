package source

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// BenchmarkCandidate10000Files measures what verifying a candidate costs
// the Gate when it adds 10,000 files (10,000 distinct 100-byte blobs in
// 100 directories: 10,102 new objects with the trees and the commit) to a small base:
//   - store: the whole of StoreCandidate (header, ref lookup, ScanPack,
//     index-pack --strict, the commit checks, the object-set check, the
//     Gate's own pack and the ref), a new attempt ref each round;
//   - object-set: the object-set check alone (rev-list --objects of the
//     candidate minus the base, the received pack's index read, the
//     comparison), on a scratch repository the pack was indexed into once;
//   - scan, index-pack and own-pack: gitx.ScanPack of the received pack,
//     its strict index, and the pack of exactly the candidate's objects
//     the Gate writes, each alone.
//
// Run with go test -run '^$' -bench Candidate10000Files ./pkg/source.
func BenchmarkCandidate10000Files(b *testing.B) {
	ctx := context.Background()
	root, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		b.Fatal("git is required")
	}
	if git, err = filepath.EvalSymlinks(git); err != nil {
		b.Fatal(err)
	}
	pub := filepath.Join(root, "public")
	if err := os.Mkdir(pub, 0o700); err != nil {
		b.Fatal(err)
	}
	work := filepath.Join(root, "work")
	prepared := filepath.Join(pub, "prepared.git")
	benchGit(b, root, nil, "init", "-q", "-b", "main", work)
	benchGit(b, root, nil, "init", "-q", "--bare", prepared)
	os.WriteFile(filepath.Join(work, "README"), []byte("base\n"), 0o644)
	benchGit(b, work, nil, "add", "-A")
	benchGit(b, work, nil, "commit", "-q", "-m", "base")
	base := benchGit(b, work, nil, "rev-parse", "HEAD")
	benchGit(b, work, nil, "push", "-q", prepared, "main")
	for d := range 100 {
		dir := filepath.Join(work, fmt.Sprintf("d%02d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			line := fmt.Sprintf("file %02d/%02d ", d, f)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", f)), []byte(line+strings.Repeat("x", 99-len(line))+"\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	benchGit(b, work, nil, "add", "-A")
	tree := benchGit(b, work, nil, "write-tree")
	forge := "Agent Forge <forge@example.invalid>"
	commit := benchGit(b, work, []string{"GIT_AUTHOR_NAME=Agent Forge", "GIT_AUTHOR_EMAIL=forge@example.invalid",
		"GIT_COMMITTER_NAME=Agent Forge", "GIT_COMMITTER_EMAIL=forge@example.invalid",
		"GIT_AUTHOR_DATE=1700000000 +0000", "GIT_COMMITTER_DATE=1700000000 +0000"}, "commit-tree", tree, "-p", base, "-m", "candidate")
	benchGit(b, work, nil, "update-ref", "refs/agent-forge/candidates/job/a0", commit)
	bundlePath := filepath.Join(root, "candidate.bundle")
	benchGit(b, work, nil, "bundle", "create", "-q", bundlePath, "refs/agent-forge/candidates/job/a0", "^"+base)
	raw, err := os.ReadFile(bundlePath)
	if err != nil {
		b.Fatal(err)
	}
	h, err := gitx.ParseBundleHeader(raw)
	if err != nil {
		b.Fatal(err)
	}
	pack := raw[h.Size:]
	p, err := New(pub, git, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	r := Repository{ID: "bench"}
	c := Candidate{Dir: prepared, Base: base, Commit: commit, Tree: tree, Author: forge, Committer: forge}
	b.Logf("candidate bundle %d bytes, %d new objects", len(raw), len(strings.Fields(benchGit(b, work, nil, "rev-list", "--objects", "--no-object-names", commit, "--not", base))))

	b.Run("store", func(b *testing.B) {
		b.StopTimer()
		for i := range b.N {
			c := c
			c.Ref = "refs/agent-forge/candidates/job/s" + strconv.Itoa(i)
			path := filepath.Join(root, "round.bundle")
			data := append(gitx.FormatBundleHeader(gitx.BundleHeader{Prerequisites: []gitx.BundlePrerequisite{{SHA: base}},
				Refs: []gitx.BundleRef{{SHA: commit, Name: c.Ref}}}), pack...)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			err := p.StoreCandidate(ctx, r, c, path, func() error { return nil })
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
		}
	})

	// One scratch repository with the received pack indexed, for the parts.
	f, err := os.Open(bundlePath)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	c.Ref = "refs/agent-forge/candidates/job/a0"
	scan, err := scanCandidatePack(f, int64(h.Size), c)
	if err != nil {
		b.Fatal(err)
	}
	tmp, err := p.scratch(prepared)
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	repo := filepath.Join(tmp, "r.git")
	g := p.runner(r)
	index := func() []byte {
		if _, err := f.Seek(int64(h.Size), 0); err != nil {
			b.Fatal(err)
		}
		out, err := g.Run(ctx, gitx.Cmd{GitDir: repo, StdinFrom: f, Args: append(indexConfig(), "index-pack", "--strict", "--fix-thin", "--stdin")})
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	out := index()
	var list []byte
	b.Run("object-set", func(b *testing.B) {
		for range b.N {
			received, err := packObjects(repo, out)
			if err != nil {
				b.Fatal(err)
			}
			list, err = g.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"rev-list", "--objects", "--no-object-names", commit, "--not", base}})
			if err != nil {
				b.Fatal(err)
			}
			if err := sameObjects(list, received, scan.Objects); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for range b.N {
			if _, err := scanCandidatePack(f, int64(h.Size), c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("index-pack", func(b *testing.B) {
		for range b.N {
			index()
		}
	})
	b.Run("own-pack", func(b *testing.B) {
		outDir := filepath.Join(tmp, "out")
		for range b.N {
			os.RemoveAll(outDir)
			if err := os.Mkdir(outDir, 0o700); err != nil {
				b.Fatal(err)
			}
			if _, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Stdin: list, Args: []string{"-c", "pack.threads=1",
				"pack-objects", "-q", "--window=0", "--depth=" + strconv.Itoa(maxCandidateDepth), "--delta-base-offset",
				filepath.Join(outDir, "pack")}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchGit runs git in dir with env added and returns its trimmed output.
func benchGit(b *testing.B, dir string, env []string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.invalid")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
