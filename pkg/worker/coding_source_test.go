package worker

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// publicFixture turns the coding fixture's repository into a public-source
// registration: a bare repository named as the Gate names prepared ones.
func publicFixture(t *testing.T, plugin string) *codingFixture {
	f := newCodingFixture(t, plugin)
	bare := filepath.Join(filepath.Dir(f.repo), source.DirName("https://github.com/octo/demo.git"))
	gitT(t, filepath.Dir(f.repo), "clone", "-q", "--bare", f.repo, bare)
	f.cfg.Repositories = append(f.cfg.Repositories, Repository{ID: "pub", Path: bare})
	f.repo = bare
	return f
}

func (f *codingFixture) publicLease(path, base string) *wire.Lease {
	l := f.lease(wire.CodingTask{RepositoryID: "pub", Instruction: "write a.txt a"}, nil)
	l.DefaultBranch, l.RepositoryPath, l.BaseSHA = "main", path, base
	return l
}

func TestCodingPublicSourceLease(t *testing.T) {
	plugin := buildEditPlugin(t)

	t.Run("prepared path and base", func(t *testing.T) {
		f := publicFixture(t, plugin)
		r := f.run(f.publicLease(f.repo, f.base))
		if !r.Succeeded || r.CandidateSHA == "" {
			t.Fatalf("report %+v", r)
		}
		if out := gitT(t, f.repo, "for-each-ref", "--format=%(objectname)", CandidatePrefix); out != r.CandidateSHA {
			t.Fatalf("candidate ref in the bare repository: %q, want %s", out, r.CandidateSHA)
		}
		f.assertClean()
	})

	t.Run("path is not the registration", func(t *testing.T) {
		f := publicFixture(t, plugin)
		other := filepath.Join(filepath.Dir(f.repo), source.DirName("https://github.com/octo/other.git"))
		gitT(t, filepath.Dir(f.repo), "clone", "-q", "--bare", f.repo, other)
		f.expectFailure(f.run(f.publicLease(other, f.base)), wire.FailureRepositoryUnavailable,
			evidence.PhasePreparation, evidence.ReasonRepositoryPathDrift)
	})

	t.Run("registration is not bare", func(t *testing.T) {
		f := publicFixture(t, plugin)
		static := f.cfg.Repositories[0]
		l := f.lease(wire.CodingTask{Instruction: "write a.txt a"}, nil)
		l.RepositoryPath, l.BaseSHA = static.Path, f.base
		f.repo = static.Path
		f.expectFailure(f.run(l), wire.FailureRepositoryUnavailable, evidence.PhasePreparation, evidence.ReasonRepositoryPathDrift)
	})

	t.Run("not yet prepared", func(t *testing.T) {
		f := publicFixture(t, plugin)
		missing := filepath.Join(filepath.Dir(f.repo), source.DirName("https://github.com/octo/later.git"))
		f.cfg.Repositories[1].Path = missing
		r := f.run(f.publicLease(missing, f.base))
		if r.Succeeded || r.Code != wire.FailureRepositoryUnavailable {
			t.Fatalf("report %+v", r)
		}
	})

	t.Run("base is not the task's", func(t *testing.T) {
		f := publicFixture(t, plugin)
		r := f.run(f.publicLease(f.repo, strings.Repeat("0", 40)))
		if r.Succeeded || r.Code != CodeInvalidTask {
			t.Fatalf("report %+v", r)
		}
		f.assertClean()
	})
}
