package githubfake

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"log/slog"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/secretscan"
)

const deliveryOwnerToken = "owner-token-of-the-gate-0123456789"

// A candidate holding one of the Gate's secrets is never pushed: the
// delivery fails secret_in_candidate in its push phase, and the fake saw
// no push, branch or pull request. The same delivery without the secret
// is pushed.
func TestDeliveryRefusesACandidateHoldingAGateSecret(t *testing.T) {
	cases := []struct {
		name    string
		content func(d *apiFixture) []byte
	}{
		{"owner token", func(*apiFixture) []byte { return []byte("OWNER=" + deliveryOwnerToken + "\n") }},
		{"owner token in base64", func(*apiFixture) []byte {
			return []byte(base64.StdEncoding.EncodeToString([]byte("Bearer " + deliveryOwnerToken)))
		}},
		{"the App's key", func(a *apiFixture) []byte {
			return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(a.key)})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPIFixture(t, basePerms)
			d := newDeliveryFixtureOn(t, a, "leak.txt", tc.content(a))
			s := d.run(t)
			if s.Phase != delivery.PhaseFailed || s.Code != delivery.CodeSecretInCandidate {
				t.Fatalf("%+v", s)
			}
			if d.gh.pushes != 0 || d.rev(t, "refs/heads/"+s.Branch) != "" || d.pulls() != 0 {
				t.Fatalf("%d pushes, branch at %q, %d pulls", d.gh.pushes, d.rev(t, "refs/heads/"+s.Branch), d.pulls())
			}
			// The log names the file, never the value.
			if l := d.logs.String(); !strings.Contains(l, `"path":"leak.txt"`) || d.gh.App.Secrets.Contains([]byte(l)) {
				t.Fatalf("log %s", l)
			}
		})
	}
	t.Run("control: no secret", func(t *testing.T) {
		a := newAPIFixture(t, basePerms)
		d := newDeliveryFixtureOn(t, a, "leak.txt", []byte("OWNER="+deliveryOwnerToken[:len(deliveryOwnerToken)-1]+"\n"))
		if s := d.run(t); d.gh.pushes != 1 || s.Code == delivery.CodeSecretInCandidate {
			t.Fatalf("%+v after %d pushes", s, d.gh.pushes)
		}
	})
}

// newDeliveryFixtureOn serves a candidate adding path with content and
// gives the App the Gate's scan set: the owner token and the App's key.
func newDeliveryFixtureOn(t *testing.T, a *apiFixture, path string, content []byte) *deliveryFixture {
	t.Helper()
	d := newDeliveryFixtureContentOn(t, a, path, content)
	var b secretscan.Builder
	b.Add([]byte(deliveryOwnerToken))
	b.AddRSAKey(a.key)
	set, err := b.Set()
	if err != nil {
		t.Fatal(err)
	}
	d.gh.App.Secrets = set
	d.logs = &bytes.Buffer{}
	d.gh.App.Log = slog.New(slog.NewJSONHandler(d.logs, nil))
	return d
}
