package publish

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A candidate holding forge-github's own secrets (the App's key file, the
// installation token it mints) is refused before anything reaches
// GitHub but the token request: secret_in_candidate, exit stage 3.
func TestCandidateHoldingASecretIsRefused(t *testing.T) {
	pem, err := os.ReadFile("../github/testdata/app-key-pkcs1.pem")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"the App key":      "key:\n" + string(pem),
		"the minted token": base64.StdEncoding.EncodeToString([]byte("token=ghs_0123456789abcdefghijABCDEFGHIJ012345")),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			run(t, f.repo, "checkout", "-q", "--detach", f.pub.ExpectedParentSHA)
			writeFile(t, filepath.Join(f.repo, "leak.txt"), content, 0o644)
			run(t, f.repo, "add", "leak.txt")
			f.pub.ExpectedTreeSHA = run(t, f.repo, "write-tree")
			f.pub.CandidateSHA = run(t, f.repo, "commit-tree", f.pub.ExpectedTreeSHA, "-p", f.pub.ExpectedParentSHA, "-m", "c")
			run(t, f.repo, "rm", "-q", "--cached", "leak.txt")
			os.Remove(filepath.Join(f.repo, "leak.txt"))
			run(t, f.repo, "checkout", "-q", "main")
			run(t, f.repo, "update-ref", f.pub.CandidateRef, f.pub.CandidateSHA)
			cfg, creds, err := LoadConfig(f.config, getenv)
			if err != nil {
				t.Fatal(err)
			}
			gh := &jwtGitHub{now: time.Now(), repo: "project"}
			_, err = New(cfg, creds, Env{Transport: gh, Now: gh.clock, Sleep: gh.sleep, TempDir: f.dir}).Run(context.Background(), &f.pub)
			wantCode(t, err, CodeSecretInCandidate, StageRefused)
		})
	}
}
