package github

import (
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// SafeBranch reports whether b may name a branch this client creates or
// targets: a conservative Git branch name (ident.ValidBranch) that is
// also not "HEAD", does not start with "refs/", is not 40 hex digits
// (each of which Git or GitHub would read as something else) and has no
// component ending in ".lock" (which Git refuses anywhere in a ref).
func SafeBranch(b string) bool {
	return ident.ValidBranch(b) && b != "HEAD" && !strings.HasPrefix(b, "refs/") && !ident.ValidSHA(strings.ToLower(b)) &&
		!strings.Contains(b, ".lock/")
}

// RemoteURL is the HTTPS URL of owner/repo on GitHub.
func RemoteURL(owner, repo string) string {
	return GitBase + "/" + owner + "/" + repo + ".git"
}
