package ident

import (
	"strings"
	"testing"
)

func TestGitHubNames(t *testing.T) {
	for s, want := range map[string]bool{"octo-org": true, "a": true, "-a": false, "a-": false, "a--b": false, "a_b": false, "": false, strings.Repeat("a", 39): true, strings.Repeat("a", 40): false} {
		if ValidGitHubOwner(s) != want {
			t.Errorf("ValidGitHubOwner(%q) = %v", s, !want)
		}
	}
	for s, want := range map[string]bool{"octocat": true, "agent-forge[bot]": true, "[bot]": false, "a[bot][bot]": false, "a[bot]x": false, "-a[bot]": false, "a\n": false} {
		if ValidGitHubLogin(s) != want {
			t.Errorf("ValidGitHubLogin(%q) = %v", s, !want)
		}
	}
	for s, want := range map[string]bool{"project": true, "a.b_c-d": true, ".": false, "..": false, "x.git": false, "x.GIT": false, "o/r": false, "": false, strings.Repeat("r", 100): true, strings.Repeat("r", 101): false} {
		if ValidGitHubRepo(s) != want {
			t.Errorf("ValidGitHubRepo(%q) = %v", s, !want)
		}
	}
	for s, want := range map[string]bool{
		CandidateRefPrefix + "job/att": true, CandidateRefPrefix + "job": false, CandidateRefPrefix + "job/": false,
		CandidateRefPrefix + "a/b/c": false, "refs/heads/x": false, CandidateRefPrefix + "j.b/a": false,
	} {
		if ValidCandidateRef(s) != want {
			t.Errorf("ValidCandidateRef(%q) = %v", s, !want)
		}
	}
}
