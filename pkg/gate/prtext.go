package gate

import (
	"context"
	"encoding/json"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/intake"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// describePR writes the pull request of delivery s from its job
// (intake.PullRequestText): the trigger's issue, the task's instruction
// and checks, the delivered attempt's report and check evidence, the
// attempts, the agent and the usage.
func (g *Gate) describePR(ctx context.Context, s delivery.State) (string, string, error) {
	agg, err := g.st.Aggregate(ctx, s.JobID)
	if err != nil {
		return "", "", err
	}
	task, err := g.st.JobTask(ctx, s.JobID)
	if err != nil {
		return "", "", err
	}
	var t wire.CodingTask
	if err := json.Unmarshal(task, &t); err != nil {
		return "", "", err
	}
	tr, ok, err := g.st.JobTrigger(ctx, s.JobID)
	if err != nil {
		return "", "", err
	}
	f := intake.PRFacts{JobID: s.JobID, Instruction: t.Instruction, Attempts: len(agg.Attempts),
		Agent: agg.Job.PluginID, UsageLine: delivery.UsageLine(s.Usage), Candidate: s.CandidateSHA}
	if ok {
		f.Trigger = &tr
	}
	for _, argv := range t.Tests {
		f.Checks = append(f.Checks, intake.CheckOutcome{Argv: argv})
	}
	// The delivered attempt: the one whose candidate this is.
	for _, a := range agg.Attempts {
		if a.CandidateSHA != s.CandidateSHA {
			continue
		}
		var r wire.AgentReport
		if len(a.AgentReport) > 0 && json.Unmarshal(a.AgentReport, &r) == nil {
			f.Summary, f.Changes = r.Summary, r.Changes
		}
		for _, raw := range a.Evidence {
			var rec evidence.Record
			if json.Unmarshal(raw, &rec) != nil || rec.Phase != evidence.PhaseScopedCheck || rec.Index == nil ||
				*rec.Index < 0 || *rec.Index >= len(f.Checks) {
				continue
			}
			c := &f.Checks[*rec.Index]
			c.Reason, c.ExitCode = string(rec.Reason), rec.ExitCode
			if rec.DurationMS != nil {
				c.DurationMS = *rec.DurationMS
			}
		}
	}
	title, body := intake.PullRequestText(f)
	return title, body, nil
}
