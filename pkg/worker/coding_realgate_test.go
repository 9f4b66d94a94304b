package worker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// TestRealGateCodingJob runs one coding job through the production Gate
// and a Worker lane: the lane binds the evidence batch (ACKed) before the
// result, and the aggregate holds the candidate, the evidence and the
// self-reported agent report.
func TestRealGateCodingJob(t *testing.T) {
	plugin := buildEditPlugin(t)
	f := newCodingFixture(t, plugin)
	exec := `{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":64,"git_output_bytes":1048576}`
	conf := fmt.Sprintf(`{"version":1,"listen":"127.0.0.1:0","database":%q,"owner_token_env":"OWNER",
 "recovery_interval":"50ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"10s","retry_base":"1s","max_attempts":2},"default_execution":%s,
 "workers":[{"id":"worker-1","pool":"local","token_env":"WTOKEN","concurrency":1}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":%s}]}`, privateDB(t), exec, exec)
	rg := startRealGate(t, []byte(conf), "")
	f.cfg.GateURL = rg.url()
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		t.Fatal(err)
	}
	obs, ev := events()
	stop := startWorker(t, Options{Config: f.cfg, Observe: obs, Executors: map[wire.Kind]Executor{wire.KindCoding: x}})
	defer stop()
	waitEvent(t, ev, EventConnected)

	task, _ := json.Marshal(map[string]any{"repository_id": "demo", "base_sha": f.base,
		"instruction": "write hello.txt hi\nreport Added hello|hello.txt: new", "tests": [][]string{{"test", "-f", "hello.txt"}}})
	var job struct{ ID string }
	if err := json.Unmarshal(rg.api("POST", "/v1/jobs", task), &job); err != nil {
		t.Fatal(err)
	}
	if e := waitEvent(t, ev, EventReported); e.JobID != job.ID || e.Code != "" {
		t.Fatalf("reported %+v", e)
	}
	var agg struct {
		Job struct {
			Status       string `json:"status"`
			CandidateSHA string `json:"candidate_sha"`
		} `json:"job"`
		Attempts []struct {
			ID          string            `json:"id"`
			Evidence    []json.RawMessage `json:"evidence"`
			AgentReport *struct {
				SelfReported bool     `json:"self_reported"`
				Summary      string   `json:"summary"`
				Changes      []string `json:"changes"`
			} `json:"agent_report"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(rg.api("GET", "/v1/jobs/"+job.ID+"/aggregate", nil), &agg); err != nil {
		t.Fatal(err)
	}
	cand := agg.Job.CandidateSHA
	if agg.Job.Status != "succeeded" || len(cand) != 40 || len(agg.Attempts) != 1 {
		t.Fatalf("aggregate %+v", agg)
	}
	at := agg.Attempts[0]
	if len(at.Evidence) != 2 || !strings.Contains(string(at.Evidence[0]), `"sha":"`+cand+`"`) ||
		string(at.Evidence[1]) != `{"phase":"candidate_commit","reason":"created","sha":"`+cand+`"}` {
		t.Fatalf("evidence %s", at.Evidence)
	}
	if r := at.AgentReport; r == nil || !r.SelfReported || r.Summary != "Added hello" || len(r.Changes) != 1 {
		t.Fatalf("agent report %+v", at.AgentReport)
	}
	if got := gitT(t, f.repo, "rev-parse", CandidateRef(job.ID, at.ID)); got != cand {
		t.Fatalf("candidate ref %s, candidate %s", got, cand)
	}
	f.assertClean()
}
