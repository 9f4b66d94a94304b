// Package publish is forge-github's run logic: publish one reviewed Worker
// candidate as a branch and pull request on GitHub through a GitHub App.
//
// LoadConfig reads github.json (strict, version 1) and the App's
// credentials: the config and the PEM key must be owned regular 0600
// files in owned directories that are not group/world writable;
// git_executable the canonical path of an owned executable that, like its
// directory, is not group/world writable; local_repository the canonical
// path of an owned, not group/world writable worktree. api_base must be
// https://api.github.com. DecodePublication reads the request on stdin.
//
// Publisher.Run then, in order:
//  1. refuses a dirty worktree, a base branch that is not
//     expected_parent_sha (base drift), and a candidate ref, tree or parent
//     that does not match;
//  2. copies exactly the base branch and the candidate ref into a fresh
//     private bare repository and checks them again there;
//  3. derives the permissions from the base→candidate diff, finds the
//     App's installation and mints a token for the one repository with
//     exactly those permissions (revoked when the run ends), and refuses
//     a candidate holding the App's key or that token, as is or encoded
//     (secret_in_candidate: github.FindSecret on the private copy);
//  4. reads the branch's PRs (any state): a closed or merged one is final;
//  5. creates the branch with a must-be-absent lease unless it is already
//     at the candidate (at another commit: branch_conflict);
//  6. reuses the open PR whose head is the candidate, or creates one,
//     reconciling a lost answer or GitHub's "already exists" by reading.
//
// Repeating a publication returns the same branch and PR. Nothing ever
// merges or waits for CI. Every failure is an *Error: a stable Code and a
// Stage (the exit code family), with no value, path or secret.
package publish
