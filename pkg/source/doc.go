// Package source prepares the Gate's public-source repositories: local
// bare repositories holding one branch of a public GitHub repository,
// which only the Gate opens (DECISIONS 15). This package is the only
// place that fetches from GitHub, and only over https. Workers receive a
// lease's base as a git bundle made here (bundle.go) and return their
// candidate as a bundle this package verifies in a scratch repository
// before it stores the candidate ref.
//
// Layout. A repository_url (exactly https://github.com/<owner>/<repo>.git,
// ident.ParsePublicURL) maps to <root>/<sha256 hex of the URL bytes>.git.
// The root also holds the Preparer's private git home (.forge-git-home),
// temporary clones (.forge-clone-*) and bundle scratch repositories
// (.forge-scratch-*), the last two removed by New, as are pack .keep
// files in the bare repositories.
//
// Preparation, on every coding submit for such a repository and before any
// job exists (Preparer.Prepare):
//
//   - first use: `git init --bare` without a template (no hooks) into a
//     temporary directory under the root, origin set to the URL, the fetch
//     below, then an atomic rename into place;
//   - reuse: the directory must be a bare repository this user owns, not
//     group/world-writable, without alternates, whose config holds only
//     the keys preparation writes and exactly one remote, origin, at
//     exactly the URL, and whose HEAD is the default branch; then the fetch;
//   - the fetch: exactly +refs/heads/<default_branch> into the same ref,
//     no tags, no other refs, no submodules, no FETCH_HEAD, through gitx
//     (no system or user config, no hooks, no credential helpers, no
//     prompts, https the only transport, redirects refused, bounded time
//     and output);
//   - the base must then be a commit of the repository and an ancestor of
//     (or equal to) the fetched branch.
//
// Serialization and sharing. Per repository at most one provisioning runs
// at a time. A submit that arrives while none runs starts one; a submit
// that arrives while one runs waits for the next one, which starts when
// the running one ends and serves every submit queued behind it. So a
// submit only ever shares a fetch that started after it arrived, and sees
// every commit pushed upstream before it arrived. Fetches run on the
// Preparer's context: a submit that stops waiting does not cancel them.
//
// Maintenance (maintain.go). The Gate names the candidate refs that
// expire (listed a page at a time, CandidateRefs) and the commits open
// jobs build on; ExpireRefs deletes the refs and PinBases pins those
// commits under refs/agent-forge/bases/; Repack, once packs pile up,
// repacks (git repack -a -d, readers never blocked) and prunes loose
// objects older than two weeks. A candidate's pack is kept (.keep) from
// its move until its ref exists.
//
// Failures are *Error values: a phase (clone, validate, fetch, base), a
// fixed reason word and whether the same submit may succeed later. They
// never hold a path, the URL or git's output (docs/api.md lists them).
package source
