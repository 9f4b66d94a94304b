package agent

import (
	"slices"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// FinalMessageBytes bounds the final message file. A valid description is
// far smaller (256 + 1024 + 12 × 256 bytes of text plus JSON escaping).
const FinalMessageBytes = 64 << 10

// Description is what survives of Codex's final message: a subject and a
// report, each present only when it was wanted and valid.
type Description struct {
	CommitSubject string   // "" when absent
	Summary       string   // "" when absent; set together with Changes
	Changes       []string // nil when absent
}

// HasReport reports whether the report pair is present.
func (d Description) HasReport() bool { return d.Summary != "" }

// finalMessage is the strict shape of the final message. Pointers tell a
// missing field from an empty one.
type finalMessage struct {
	CommitSubject *string   `json:"commit_subject"`
	Summary       *string   `json:"summary"`
	Changes       *[]string `json:"changes"`
}

// ParseFinal applies the fallback rules (see the package documentation)
// to a final message: a malformed or wrongly shaped message yields nothing;
// otherwise each wanted part is kept only if it is valid.
func ParseFinal(data []byte, want Want) Description {
	if len(data) > FinalMessageBytes || !want.Structured() {
		return Description{}
	}
	var m finalMessage
	if err := strictjson.Decode(data, &m); err != nil {
		return Description{}
	}
	hasReport := m.Summary != nil && m.Changes != nil
	if (m.CommitSubject != nil) != want.Subject || hasReport != want.Report ||
		(m.Summary != nil) != (m.Changes != nil) {
		return Description{}
	}
	var d Description
	if want.Subject && plugin.CheckCommitSubject(*m.CommitSubject) == nil {
		d.CommitSubject = *m.CommitSubject
	}
	if want.Report && plugin.CheckReport(*m.Summary, *m.Changes) == nil {
		d.Summary, d.Changes = *m.Summary, slices.Clone(*m.Changes)
	}
	return d
}
