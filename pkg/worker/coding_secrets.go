package worker

import (
	"context"
	"encoding/json"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
	"github.com/0k-lab/agent-forge/pkg/secretscan"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// No secret leaves in a candidate or in evidence (DECISIONS 19): the
// coding pipeline refuses a change, commit subject, agent report or
// evidence batch that holds a value of the Worker's secret set
// (CodingOptions.Secrets, built once at start by Secrets) in any form
// pkg/secretscan knows. Such an attempt fails with the terminal
// secret_in_candidate; nothing is committed and no such batch is sent;
// its one record names the file (never the value).

// Secrets builds the set of every secret value this Worker holds and
// uses itself, never handing it on: its Worker token and the model
// gateway's provider keys (gw.Secrets; gw may be nil). A value CheckHost
// or OpenGateway accepted is never refused here. Variables the
// environment allowlists hand to plugins and checks are not secrets of
// the Worker's: the agent may hold them.
func Secrets(c *Config, token string, gw *gateway.Gateway) (*secretscan.Set, error) {
	var b secretscan.Builder
	b.Add([]byte(token))
	if gw != nil {
		for _, k := range gw.Secrets() {
			b.Add([]byte(k))
		}
	}
	s, err := b.Set()
	if err != nil {
		return nil, fieldErr("token_env", "the token or a provider key cannot be scanned for")
	}
	return s, nil
}

// findSecret scans the change (gitx.FindSecret): the path of the first
// file holding a secret, found also when a changed path itself holds one
// (path "" then).
func (j *codingJob) findSecret(ctx context.Context, changes []gitx.Change) (string, bool, error) {
	return j.git.FindSecret(ctx, j.objectsGitDir(), changes, j.x.opt.Secrets)
}

// failSecret ends the attempt: one record naming path (when it can be
// named), the terminal code.
func (j *codingJob) failSecret(path string) outcome {
	j.records = append(j.records, evidence.SecretInCandidate(path))
	return outcome{report: Report{Code: wire.FailureSecretInCandidate}}
}

// reportHoldsSecret reports whether the plugin's commit subject or agent
// report holds a secret (both leave with the candidate).
func (j *codingJob) reportHoldsSecret(res host.Outcome) bool {
	set := j.x.opt.Secrets
	if set.Len() == 0 {
		return false
	}
	sc := set.Scanner()
	for _, s := range []*string{res.CommitSubject, res.Summary} {
		if s != nil {
			sc.Write([]byte(*s))
			sc.Write([]byte{0})
		}
	}
	for _, c := range res.Changes {
		sc.Write([]byte(c))
		sc.Write([]byte{0})
	}
	return sc.Found()
}

// evidenceHoldsSecret reports whether an encoded batch holds a secret.
func (j *codingJob) evidenceHoldsSecret(raw []json.RawMessage) bool {
	set := j.x.opt.Secrets
	if set.Len() == 0 {
		return false
	}
	sc := set.Scanner()
	for _, r := range raw {
		sc.Write(r)
		sc.Write([]byte{'\n'})
	}
	return sc.Found()
}
