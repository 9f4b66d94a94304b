package worker

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/secretscan"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// workerSecrets is the set a Worker holding testToken builds at start.
func workerSecrets(t *testing.T) *secretscan.Set {
	t.Helper()
	s, err := Secrets(&Config{}, testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The agent writes the Worker's token (or an encoding of it) into the
// change, a path, the commit subject or the agent report: the attempt
// fails secret_in_candidate, nothing is committed, the one record names
// the file and never the value.
func TestSecretInCandidate(t *testing.T) {
	plugin := buildEditPlugin(t)
	b64 := base64.StdEncoding.EncodeToString([]byte("x" + testToken)) // off the 3-byte grid, padded
	cases := []struct {
		name, instruction, path string
	}{
		{"raw", "write ok.txt fine\nwrite conf/env.txt TOKEN=" + testToken, "conf/env.txt"},
		{"base64", "write notes.txt " + b64, "notes.txt"},
		{"base64 url unpadded", "write n.txt " + base64.RawURLEncoding.EncodeToString([]byte("ab"+testToken)), "n.txt"},
		{"hex upper", "write h.txt " + strings.ToUpper(hex.EncodeToString([]byte(testToken))), "h.txt"},
		{"url encoded", "write u.txt https://x.invalid/?t=" + url.QueryEscape("%"+testToken), "u.txt"},
		{"symlink target", "write ok.txt fine\nsymlink link " + testToken, "link"},
		{"modified file", "write README " + testToken, "README"},
		{"in a path", "write dir-" + testToken + "/a.txt a", ""},
		{"commit subject", "write a.txt a\nsubject fix: " + testToken, ""},
		{"agent report", "write a.txt a\nreport done|a.txt: " + b64, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newCodingFixture(t, plugin)
			f.secrets = workerSecrets(t)
			r := f.run(f.lease(wire.CodingTask{Instruction: tc.instruction, Tests: [][]string{{"true"}}}, nil))
			// expectFailure: no candidate ref, nothing left behind.
			f.expectFailure(r, wire.FailureSecretInCandidate, evidence.PhaseWorkspaceValidation, evidence.ReasonSecretInCandidate)
			if r.CandidateSHA != "" || r.AgentReport != nil {
				t.Fatalf("report %+v", r)
			}
			recs := f.records(evidence.Options{ArgCounts: []int{1}, BaseSHA: f.base})
			if len(recs[0]) != 1 || recs[0][0].Path != tc.path {
				t.Fatalf("records %+v, want the path %q", recs[0], tc.path)
			}
			for _, b := range f.batches {
				for _, rec := range b {
					if f.secrets.Contains(rec) {
						t.Fatalf("evidence holds the secret: %s", rec)
					}
				}
			}
		})
	}
	t.Run("no secret: the same change succeeds", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		f.secrets = workerSecrets(t)
		r := f.run(f.lease(wire.CodingTask{Instruction: "write conf/env.txt TOKEN=" + testToken[:len(testToken)-1] +
			"\nsymlink link target\nsubject fix: it"}, nil))
		if !r.Succeeded {
			t.Fatalf("report %+v", r)
		}
	})
}

// A batch of evidence holding a secret is never sent: here the Worker's
// secret set holds the bytes whose hex is the base commit, which a failing
// check's record names. The attempt fails secret_in_candidate and the
// only batch sent is its one record.
func TestSecretInEvidence(t *testing.T) {
	f := newCodingFixture(t, buildEditPlugin(t))
	raw, err := hex.DecodeString(f.base)
	if err != nil {
		t.Fatal(err)
	}
	if f.secrets, err = secretscan.New(raw); err != nil {
		t.Fatal(err)
	}
	r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a", Tests: [][]string{{"false"}}}, nil))
	f.expectFailure(r, wire.FailureSecretInCandidate, evidence.PhaseWorkspaceValidation, evidence.ReasonSecretInCandidate)
	for _, b := range f.batches {
		for _, rec := range b {
			if strings.Contains(string(rec), f.base) {
				t.Fatalf("a batch naming the base was sent: %s", rec)
			}
		}
	}
	if got, _ := json.Marshal(f.batches); string(got) != `[[{"phase":"workspace_validation","reason":"secret_in_candidate"}]]` {
		t.Fatalf("batches %s", got)
	}
}

// On a Gate registration the candidate would go to the Gate as a bundle:
// a planted token fails the job secret_in_candidate (terminal, one
// attempt) and the Gate never receives a candidate.
func TestPublicSourceSecretInCandidate(t *testing.T) {
	w := newPublicWorld(t, 1, "")
	ev := w.startPublicWorkerWith(w.workerConfig("worker-1", 1), testToken, workerSecrets(t))
	waitEvent(t, ev, EventConnected)
	base := w.advance(0)
	id := w.submit(base, "write leak.txt "+base64.StdEncoding.EncodeToString([]byte(testToken)))
	j := w.waitJob(id)
	if j.Job.Status != "failed" || j.Job.FailureCode != wire.FailureSecretInCandidate || j.Job.AttemptCount != 1 {
		t.Fatalf("job %+v", j)
	}
	if refs := gitT(t, w.prepared, "for-each-ref", CandidatePrefix); refs != "" {
		t.Fatalf("a candidate reached the Gate: %s", refs)
	}
	agg := string(w.rg.api("GET", "/v1/jobs/"+id+"/aggregate", nil))
	if !strings.Contains(agg, `{"phase":"workspace_validation","reason":"secret_in_candidate","path":"leak.txt"}`) {
		t.Fatalf("aggregate %s", agg)
	}
}
