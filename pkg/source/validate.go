package source

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// allowedConfig are the only keys (as git lists them, lowercase) an
// existing bare repository's own config may hold: what git init and
// preparation write, and nothing that could redirect, authenticate,
// proxy or run anything.
var allowedConfig = map[string]bool{
	"core.repositoryformatversion": true,
	"core.filemode":                true,
	"core.bare":                    true,
	"core.symlinks":                true,
	"core.ignorecase":              true,
	"core.precomposeunicode":       true,
	"core.logallrefupdates":        true,
	"extensions.objectformat":      true,
	"remote.origin.url":            true,
}

// maxConfigBytes bounds the listed config of a repository under check.
const maxConfigBytes = 64 << 10

// validate requires dir (already Lstat'ed as fi) to be a bare repository
// this user owns, without alternates, grafts or a shallow list, whose config holds only allowed keys
// with exactly one remote, origin, at exactly r.URL, and whose HEAD is the
// default branch.
func (p *Preparer) validate(g *gitx.Runner, r Repository, dir string, fi fs.FileInfo) error {
	unsafe := &Error{Phase: PhaseValidate, Reason: ReasonUnsafeRepository}
	if !fi.IsDir() || !ownedByMe(fi) || fi.Mode().Perm()&0o022 != 0 {
		return unsafe
	}
	for _, name := range []string{"config", "HEAD"} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			return &Error{Phase: PhaseValidate, Reason: ReasonNotBare}
		}
	}
	// Borrowed objects, or history faked by a graft file or a shallow list
	// (under which a commit not on the default branch upstream could pass
	// as its ancestor): preparation writes none of them.
	for _, name := range []string{"objects/info/alternates", "objects/info/http-alternates", "commondir", "info/grafts", "shallow"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return unsafe
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "objects")); err != nil || !fi.IsDir() {
		return &Error{Phase: PhaseValidate, Reason: ReasonNotBare}
	}
	bare, err := g.Line(p.ctx, gitx.Cmd{GitDir: dir, Args: []string{"rev-parse", "--is-bare-repository"}})
	if err != nil {
		if _, exited := gitx.ExitCode(err); exited {
			return &Error{Phase: PhaseValidate, Reason: ReasonNotBare}
		}
		return gitError(PhaseValidate, err)
	}
	if bare != "true" {
		return &Error{Phase: PhaseValidate, Reason: ReasonNotBare}
	}
	list, err := (&gitx.Runner{Git: g.Git, Home: g.Home, Timeout: g.Timeout, OutputBytes: maxConfigBytes, Reaper: g.Reaper}).Run(p.ctx,
		gitx.Cmd{GitDir: dir, Args: []string{"config", "--local", "--no-includes", "--null", "--list"}})
	if err != nil {
		return gitError(PhaseValidate, err)
	}
	if reason := checkConfig(list, r.URL); reason != "" {
		return &Error{Phase: PhaseValidate, Reason: reason}
	}
	// --no-recurse: HEAD's own target, readable even when a killed fetch
	// left that branch's ref torn (repairBranch mends it next).
	head, err := g.Line(p.ctx, gitx.Cmd{GitDir: dir, Args: []string{"symbolic-ref", "--quiet", "--no-recurse", "HEAD"}})
	if err != nil {
		if _, exited := gitx.ExitCode(err); exited {
			return &Error{Phase: PhaseValidate, Reason: ReasonBranchMismatch}
		}
		return gitError(PhaseValidate, err)
	}
	if head != "refs/heads/"+r.Branch {
		return &Error{Phase: PhaseValidate, Reason: ReasonBranchMismatch}
	}
	return nil
}

// checkConfig reads `git config --null --list` output (key, newline,
// value, NUL per entry) and returns "" when it holds only allowed keys and
// exactly one remote.origin.url equal to url, else a reason.
func checkConfig(list []byte, url string) string {
	origins := 0
	for _, entry := range bytes.Split(list, []byte{0}) {
		if len(entry) == 0 {
			continue
		}
		key, value, _ := bytes.Cut(entry, []byte("\n"))
		k := string(key)
		if !allowedConfig[k] {
			if bytes.HasPrefix(key, []byte("remote.")) {
				return ReasonOriginMismatch
			}
			return ReasonUnexpectedConfig
		}
		if k == "remote.origin.url" {
			origins++
			if string(value) != url {
				return ReasonOriginMismatch
			}
		}
	}
	if origins != 1 {
		return ReasonOriginMismatch
	}
	return ""
}
