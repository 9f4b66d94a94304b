package worker

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/cli"
	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/providerfake"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// providerTLS is the provider fakes' server configuration; the test
// process trusts its authority through SSL_CERT_FILE (withProviderTLS),
// as a production Worker trusts its providers through the system roots.
var providerTLS *tls.Config

// withProviderTLS runs the tests with a fresh authority for the provider
// fakes in SSL_CERT_FILE (before anything loaded the system roots).
func withProviderTLS(run func() int) int {
	dir, err := os.MkdirTemp("", "worker-provider-ca-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ca := filepath.Join(dir, "ca.pem")
	if providerTLS, err = providerfake.NewTLS(ca); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("SSL_CERT_FILE", ca)
	os.Unsetenv("SSL_CERT_DIR")
	return run()
}

// fakeResponses is an OpenAI Responses API stand-in: every request is
// answered with a server-sent event stream (providerfake.Stream) whose
// response.completed event reports 40 input tokens (30 of them cached)
// and 20 output tokens, or with the same usage in a JSON body when the
// request asks for "stream":false.
type fakeResponses struct {
	srv  *httptest.Server
	reqs atomic.Int64
	keys atomic.Int64 // requests that carried the real key
}

func newFakeResponses(t *testing.T) *fakeResponses {
	t.Helper()
	f := &fakeResponses{}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.reqs.Add(1)
		if r.Header.Get("Authorization") == "Bearer "+testProviderKey {
			f.keys.Add(1)
		}
		body, _ := io.ReadAll(r.Body)
		usage := map[string]any{"input_tokens": 40, "input_tokens_details": map[string]any{"cached_tokens": 30}, "output_tokens": 20}
		if strings.Contains(string(body), `"stream":false`) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"object": "response", "status": "completed", "usage": usage})
			return
		}
		s := providerfake.StartStream(w)
		s.Event("response.created", map[string]any{"response": map[string]any{"id": "resp_1"}})
		s.Flush()
		s.Event("response.output_text.delta", map[string]any{"delta": "hello"})
		s.Flush()
		s.Event("response.completed", map[string]any{"response": map[string]any{"id": "resp_1", "usage": usage}})
		s.Flush()
	}))
	f.srv.TLS = providerTLS.Clone()
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// meteredGateway is the Worker's gateway for one provider "p" whose
// upstream is fake.
func meteredGateway(t *testing.T, c *Config, fake *fakeResponses) *gateway.Gateway {
	t.Helper()
	var err error
	c.Providers, err = gateway.ParseProviders([]gateway.FileProvider{{ID: "p", Kind: "openai-responses", BaseURL: fake.srv.URL + "/v1", KeyEnv: "P_KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := OpenGateway(c, func(string) string { return testProviderKey })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

// modelExec stands in for an agent: it calls the model through the
// attempt's gateway grant, as an agent CLI would, until the gateway
// refuses or it has made its requests. The task says how many requests
// (text: the input "N"; coding: the instruction "N" or "N then fail",
// where the first attempt fails retryably after N requests and later
// attempts call until refused).
type modelExec struct {
	statuses chan []int // the gateway's answers, per attempt
}

func (x *modelExec) Execute(ctx context.Context, a *Attempt) Report {
	script := ""
	if a.Lease.Kind == wire.KindText {
		t, _ := wire.DecodeTextTask(a.Lease.Task)
		script = t.Input
	} else {
		t, _ := wire.DecodeCodingTask(a.Lease.Task)
		script = t.Instruction
	}
	var n int
	fmt.Sscanf(script, "%d", &n)
	failFirst := strings.HasSuffix(script, "then fail")
	if failFirst && a.Lease.Ordinal > 1 {
		n = 1 << 10 // until refused
	}
	var got []int
	for i := 0; i < n; i++ {
		body := `{"model":"m","input":"hi","stream":true}`
		if i%2 == 1 {
			body = `{"model":"m","input":"hi","stream":false}`
		}
		st := modelCall(a.Grant, body)
		got = append(got, st)
		if st != http.StatusOK {
			break
		}
	}
	x.statuses <- got
	if got[len(got)-1] != http.StatusOK || failFirst {
		return Report{Code: CodePluginFailed} // the agent gave up
	}
	if a.Lease.Kind == wire.KindText {
		return Report{Succeeded: true, Output: "done"}
	}
	return Report{Code: CodePluginFailed}
}

// modelCall posts one Responses request with the grant's credential and
// reads the whole answer; it returns the status (0: no answer). A
// refusal must be the gateway's fixed budget_exceeded error.
func modelCall(gr *gateway.Grant, body string) int {
	req, _ := http.NewRequest("POST", gateway.ProviderURL(gr.URL(), "p")+"/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+gr.Credential())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusForbidden && !strings.Contains(string(b), `"code":"budget_exceeded"`) {
		return -1
	}
	return resp.StatusCode
}

// usageGate is a real Gate with the text pool and a coding repository
// "a" whose budget is the JSON object budget.
func usageGate(t *testing.T, budget string, maxAttempts int) *realGate {
	t.Helper()
	db := privateDB(t)
	exec := `{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}`
	conf := fmt.Sprintf(`{"version":1,"listen":"127.0.0.1:0","database":%q,"owner_token_env":"OWNER",
 "recovery_interval":"20ms","lease_poll_interval":"20ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"30s","retry_base":"1ms","max_attempts":%d},
 "default_execution":%s,
 "workers":[{"id":"worker-1","pool":"local","token_env":"WTOKEN","concurrency":1}],
 "repositories":[{"id":"a","default_branch":"main","worker_pool":"local","execution":%s,"budget":%s}]}`,
		db, maxAttempts, exec, exec, budget)
	return startRealGate(t, []byte(conf), "")
}

func (rg *realGate) submitCoding(instruction string) string {
	rg.t.Helper()
	body, _ := json.Marshal(map[string]any{"repository_id": "a", "base_sha": strings.Repeat("ab", 20), "instruction": instruction})
	var j struct{ ID string }
	if err := json.Unmarshal(rg.api("POST", "/v1/jobs", body), &j); err != nil {
		rg.t.Fatal(err)
	}
	return j.ID
}

// usageAggregate is the part of the aggregate these tests read.
type usageAggregate struct {
	Job struct {
		Status      string       `json:"status"`
		FailureCode string       `json:"failure_code"`
		Usage       *store.Usage `json:"usage"`
	} `json:"job"`
	Attempts []struct {
		Ordinal     int          `json:"ordinal"`
		FailureCode string       `json:"failure_code"`
		Usage       *store.Usage `json:"usage"`
	} `json:"attempts"`
}

func (rg *realGate) waitUsage(id string) usageAggregate {
	rg.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var a usageAggregate
		if err := json.Unmarshal(rg.api("GET", "/v1/jobs/"+id+"/aggregate", nil), &a); err != nil {
			rg.t.Fatal(err)
		}
		if a.Job.Status == "succeeded" || a.Job.Status == "failed" {
			return a
		}
		time.Sleep(10 * time.Millisecond)
	}
	rg.t.Fatal("job never ended")
	return usageAggregate{}
}

func meteredWorker(t *testing.T, rg *realGate, fake *fakeResponses) *modelExec {
	t.Helper()
	c, _ := hostFixture(t)
	c.GateURL, c.Concurrency, c.HeartbeatInterval = rg.url(), 1, time.Second
	gw := meteredGateway(t, c, fake)
	x := &modelExec{statuses: make(chan []int, 8)}
	startWorker(t, Options{Config: c, Gateway: gw, Executors: map[wire.Kind]Executor{wire.KindText: x, wire.KindCoding: x}})
	return x
}

// TestUsageReachesTheAggregate: an attempt's model calls through the
// real gateway to a provider fake (two streamed, one JSON answer) are
// metered, returned with the result, stored with the attempt and served
// in the job's aggregate, per attempt and as the job's total.
func TestUsageReachesTheAggregate(t *testing.T) {
	fake := newFakeResponses(t)
	rg := usageGate(t, `{"job":{"max_requests":1000}}`, 1)
	x := meteredWorker(t, rg, fake)
	id := rg.submit("3")
	a := rg.waitUsage(id)
	if st := recv(t, x.statuses, "statuses"); fmt.Sprint(st) != "[200 200 200]" {
		t.Fatalf("gateway answers %v", st)
	}
	want := store.Usage{Requests: 3, InputTokens: 120, OutputTokens: 60, CachedTokens: 90}
	if a.Job.Status != "succeeded" || len(a.Attempts) != 1 || a.Attempts[0].Usage == nil || *a.Attempts[0].Usage != want {
		t.Fatalf("aggregate %+v, attempt usage %+v, want %+v", a.Job, a.Attempts, want)
	}
	if a.Job.Usage == nil || *a.Job.Usage != want {
		t.Fatalf("job usage %+v, want %+v", a.Job.Usage, want)
	}
	if fake.reqs.Load() != 3 || fake.keys.Load() != 3 {
		t.Fatalf("the provider saw %d requests, %d with the key", fake.reqs.Load(), fake.keys.Load())
	}
	stored, err := rg.st.Aggregate(context.Background(), id)
	if err != nil || stored.Attempts[0].Usage == nil || *stored.Attempts[0].Usage != want {
		t.Fatalf("stored %+v %v", stored.Attempts, err)
	}
	// forge status prints the job with its usage, forge result the
	// aggregate with each attempt's.
	env := map[string]string{"FORGE_GATE_URL": "http://" + rg.addr, "FORGE_OWNER_TOKEN": ownerToken}
	for _, cmd := range []string{"status", "result"} {
		var out, errOut bytes.Buffer
		if err := cli.Run(context.Background(), []string{cmd, id}, strings.NewReader(""), &out, &errOut,
			func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
			t.Fatalf("forge %s: %v %s", cmd, err, errOut.String())
		}
		var shown struct {
			Usage *store.Usage `json:"usage"`
		}
		if cmd == "status" {
			if json.Unmarshal(out.Bytes(), &shown) != nil || shown.Usage == nil || *shown.Usage != want {
				t.Fatalf("forge status shows %s", out.String())
			}
			continue
		}
		var agg usageAggregate
		if json.Unmarshal(out.Bytes(), &agg) != nil || agg.Job.Usage == nil || *agg.Job.Usage != want ||
			agg.Attempts[0].Usage == nil || *agg.Attempts[0].Usage != want {
			t.Fatalf("forge result shows %s", out.String())
		}
	}
}

// TestAttemptBudgetExceeded: a per-attempt token budget of 100 lets two
// requests of 60 tokens through (60 < 100, then 120 > 100: the grant is
// exceeded) and refuses the third (budget_exceeded, or the revoked
// credential once the Worker stopped the attempt); the attempt fails
// budget_exceeded, which is terminal: no retry.
func TestAttemptBudgetExceeded(t *testing.T) {
	fake := newFakeResponses(t)
	rg := usageGate(t, `{"attempt":{"max_tokens":100}}`, 3)
	x := meteredWorker(t, rg, fake)
	id := rg.submitCoding("5")
	a := rg.waitUsage(id)
	if st := fmt.Sprint(recv(t, x.statuses, "statuses")); st != "[200 200 403]" && st != "[200 200 401]" {
		t.Fatalf("gateway answers %v", st)
	}
	if a.Job.Status != "failed" || a.Job.FailureCode != wire.FailureBudgetExceeded || len(a.Attempts) != 1 {
		t.Fatalf("job %+v, %d attempts", a.Job, len(a.Attempts))
	}
	want := store.Usage{Requests: 2, InputTokens: 80, OutputTokens: 40, CachedTokens: 60}
	if u := a.Attempts[0].Usage; u == nil || *u != want || a.Attempts[0].FailureCode != wire.FailureBudgetExceeded {
		t.Fatalf("attempt %+v, want usage %+v", a.Attempts[0], want)
	}
	if fake.reqs.Load() != 2 {
		t.Fatalf("the provider saw %d requests, want 2", fake.reqs.Load())
	}
}

// TestOneAnswerPastTheBudget: an attempt whose only answer reports more
// tokens than its budget (60 of 50) fails budget_exceeded, terminal,
// though the gateway refused nothing and the agent asked for no more.
func TestOneAnswerPastTheBudget(t *testing.T) {
	fake := newFakeResponses(t)
	rg := usageGate(t, `{"attempt":{"max_tokens":50}}`, 3)
	x := meteredWorker(t, rg, fake)
	a := rg.waitUsage(rg.submitCoding("1"))
	if st := recv(t, x.statuses, "statuses"); fmt.Sprint(st) != "[200]" {
		t.Fatalf("gateway answers %v", st)
	}
	want := store.Usage{Requests: 1, InputTokens: 40, OutputTokens: 20, CachedTokens: 30}
	if a.Job.Status != "failed" || a.Job.FailureCode != wire.FailureBudgetExceeded || len(a.Attempts) != 1 ||
		a.Attempts[0].Usage == nil || *a.Attempts[0].Usage != want {
		t.Fatalf("job %+v, attempts %+v", a.Job, a.Attempts)
	}
}

// lingeringExec calls the model until refused, then keeps running until
// the lane cancels it and tries the credential once more, as an agent
// that ignores the refusal would, before it returns.
type lingeringExec struct{ after chan int }

func (x *lingeringExec) Execute(ctx context.Context, a *Attempt) Report {
	for modelCall(a.Grant, `{"model":"m","input":"hi","stream":true}`) == http.StatusOK {
	}
	<-ctx.Done()
	x.after <- modelCall(a.Grant, `{"model":"m","input":"hi","stream":true}`)
	return Report{Code: CodePluginFailed}
}

// TestSpentBudgetRevokesTheCredential: once the budget is spent, the
// lane revokes the attempt's credential before the executor returns:
// what the attempt still runs gets invalid_credential.
func TestSpentBudgetRevokesTheCredential(t *testing.T) {
	fake := newFakeResponses(t)
	rg := usageGate(t, `{"attempt":{"max_requests":2}}`, 1)
	c, _ := hostFixture(t)
	c.GateURL, c.Concurrency, c.HeartbeatInterval = rg.url(), 1, time.Second
	gw := meteredGateway(t, c, fake)
	x := &lingeringExec{after: make(chan int, 1)}
	startWorker(t, Options{Config: c, Gateway: gw, Executors: map[wire.Kind]Executor{wire.KindCoding: x}})
	a := rg.waitUsage(rg.submitCoding("x"))
	if st := recv(t, x.after, "the call after the cancel"); st != http.StatusUnauthorized {
		t.Fatalf("after the budget was spent the credential answered %d", st)
	}
	if a.Job.FailureCode != wire.FailureBudgetExceeded || fake.reqs.Load() != 2 {
		t.Fatalf("job %+v, provider saw %d", a.Job, fake.reqs.Load())
	}
}

// TestJobBudgetSpansAttempts: a per-job budget of 3 requests: the first
// attempt spends 2 and fails retryably (within the budget: no
// budget_exceeded); the retry is leased the remaining 1, which its first
// request spends, and its second request is refused: budget_exceeded.
func TestJobBudgetSpansAttempts(t *testing.T) {
	fake := newFakeResponses(t)
	rg := usageGate(t, `{"attempt":{"max_requests":50},"job":{"max_requests":3}}`, 3)
	x := meteredWorker(t, rg, fake)
	id := rg.submitCoding("2 then fail")
	a := rg.waitUsage(id)
	if st := recv(t, x.statuses, "first attempt"); fmt.Sprint(st) != "[200 200]" {
		t.Fatalf("first attempt: gateway answers %v", st)
	}
	if st := recv(t, x.statuses, "second attempt"); fmt.Sprint(st) != "[200 403]" {
		t.Fatalf("second attempt: gateway answers %v", st)
	}
	if a.Job.Status != "failed" || a.Job.FailureCode != wire.FailureBudgetExceeded || len(a.Attempts) != 2 {
		t.Fatalf("job %+v, %d attempts", a.Job, len(a.Attempts))
	}
	if f := a.Attempts[0].FailureCode; f != wire.FailurePluginFailed || a.Attempts[0].Usage == nil || a.Attempts[0].Usage.Requests != 2 {
		t.Fatalf("first attempt %+v", a.Attempts[0])
	}
	if f := a.Attempts[1].FailureCode; f != wire.FailureBudgetExceeded || a.Attempts[1].Usage == nil || a.Attempts[1].Usage.Requests != 1 {
		t.Fatalf("second attempt %+v", a.Attempts[1])
	}
	if a.Job.Usage == nil || a.Job.Usage.Requests != 3 || fake.reqs.Load() != 3 {
		t.Fatalf("job usage %+v, provider saw %d", a.Job.Usage, fake.reqs.Load())
	}
}

// countingExec counts the attempts it was given.
type countingExec struct{ runs atomic.Int64 }

func (x *countingExec) Execute(ctx context.Context, a *Attempt) Report {
	x.runs.Add(1)
	return Report{Succeeded: true, Output: "ran"}
}

// TestLeaseBudgetRefusals: a Worker offers gateway usage only when it
// serves a gateway; a lease whose budget has nothing left is failed
// budget_exceeded (with zero usage) before anything runs, and a lease
// that selects usage on a Worker without a gateway is refused
// policy_exceeds_ceiling; a metered lease without a budget runs and
// reports its (zero) usage.
func TestLeaseBudgetRefusals(t *testing.T) {
	fake := newFakeResponses(t)
	none, some, more := int64(0), int64(7), int64(8)
	// A policy whose budget bounds each attempt to 7 tokens and the job
	// to 10 requests: a lease of it must bound both, within those.
	budgeted, err := policy.Decode(testPolicy("reference"))
	if err != nil {
		t.Fatal(err)
	}
	ten := int64(10)
	budgeted.Budget = &policy.Budget{Attempt: &policy.Limits{MaxTokens: &some}, Job: &policy.Limits{MaxRequests: &ten}}
	budgetedPolicy := budgeted.Canonical()
	withBudget := func(tokens, requests *int64) func(l *wire.Lease) {
		return func(l *wire.Lease) {
			l.Policy, l.UsageVersion = budgetedPolicy, wire.UsageV1
			if tokens != nil || requests != nil {
				l.Budget = &wire.Budget{MaxTokens: tokens, MaxRequests: requests}
			}
		}
	}
	for _, c := range []struct {
		name     string
		gateway  bool
		lease    func(l *wire.Lease)
		wantCode string
	}{
		{"budgeted policy, no lease budget", true, withBudget(nil, nil), CodePolicyExceedsCeiling},
		{"budgeted policy, a limit dropped", true, withBudget(&some, nil), CodePolicyExceedsCeiling},
		{"budgeted policy, over the attempt limit", true, withBudget(&more, &ten), CodePolicyExceedsCeiling},
		{"budgeted policy, over the job limit", true, withBudget(&some, new(int64(11))), CodePolicyExceedsCeiling},
		{"budgeted policy, unmetered", true, func(l *wire.Lease) { l.Policy = budgetedPolicy }, CodePolicyExceedsCeiling},
		{"budget without a policy budget", true, func(l *wire.Lease) {
			l.UsageVersion, l.Budget = wire.UsageV1, &wire.Budget{MaxTokens: &some}
		}, CodePolicyExceedsCeiling},
		{"budgeted policy, within it", true, withBudget(&some, &ten), ""},
		{"nothing left", true, withBudget(&some, &none), CodeBudgetExceeded},
		{"no gateway", false, func(l *wire.Lease) { l.UsageVersion = wire.UsageV1 }, CodePolicyExceedsCeiling},
		{"unknown version", true, func(l *wire.Lease) { l.UsageVersion = "gateway_usage/v9" }, CodePolicyExceedsCeiling},
		{"metered", true, func(l *wire.Lease) { l.UsageVersion = wire.UsageV1 }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newFakeGate(t)
			cfg := laneConfig(t, g, 1)
			opt := Options{Config: cfg, Executors: map[wire.Kind]Executor{wire.KindText: &countingExec{}}}
			x := opt.Executors[wire.KindText].(*countingExec)
			if c.gateway {
				opt.Gateway = meteredGateway(t, cfg, fake)
			}
			startWorker(t, opt)
			conn := g.accept()
			if offered := strings.Join(conn.hello.UsageVersions, ","); (offered == wire.UsageV1) != c.gateway || (!c.gateway && offered != "") {
				t.Fatalf("hello offers %q", offered)
			}
			e := textLease("j", "a", testPolicy("reference"), "x")
			c.lease(e.Lease)
			conn.lease(t, e)
			env := conn.nextOf(t, wire.TypeResult)
			conn.reply(t, env.Seq, true)
			res := env.Result
			if c.wantCode == "" {
				if res.Outcome != wire.OutcomeSucceeded || res.Usage == nil || *res.Usage != (wire.Usage{}) || x.runs.Load() != 1 {
					t.Fatalf("result %+v usage %+v", res, res.Usage)
				}
				return
			}
			if res.FailureCode != c.wantCode || x.runs.Load() != 0 {
				t.Fatalf("result %+v after %d runs, want %s before any", res, x.runs.Load(), c.wantCode)
			}
			if c.gateway && c.wantCode == CodeBudgetExceeded && (res.Usage == nil || *res.Usage != (wire.Usage{})) {
				t.Fatalf("usage %+v", res.Usage)
			}
		})
	}
}

// TestBudgetedPolicyNeedsMetering: the executors refuse a policy with a
// budget on an attempt the gateway does not meter.
func TestBudgetedPolicyNeedsMetering(t *testing.T) {
	c, _ := hostFixture(t)
	p, err := policy.Decode(testPolicy("reference"))
	if err != nil {
		t.Fatal(err)
	}
	p.Budget = &policy.Budget{Job: &policy.Limits{MaxRequests: new(int64)}}
	*p.Budget.Job.MaxRequests = 3
	if _, code := c.resolve(p, func(string) (string, bool) { return "", false }, false); code != CodePolicyExceedsCeiling {
		t.Fatalf("unmetered: %q", code)
	}
	if _, code := c.resolve(p, func(string) (string, bool) { return "", false }, true); code == CodePolicyExceedsCeiling {
		t.Fatal("metered attempt refused")
	}
	var a *Attempt
	if a.metered() {
		t.Fatal("no attempt is metered")
	}
}

// TestCodingAttemptBudget: the real coding executor and a plugin that
// calls the model through the gateway with the credential the Worker put
// in its environment. Within the budget the job succeeds with its
// candidate and its usage; past it (per attempt, 2 requests) the third
// call is refused and the attempt is stopped: it fails budget_exceeded
// with its usage and no candidate, nothing is retried, and the worktree
// is gone.
func TestCodingAttemptBudget(t *testing.T) {
	fake := newFakeResponses(t)
	f := newCodingFixture(t, buildEditPlugin(t))
	exec := `{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":64,"git_output_bytes":1048576}`
	conf := fmt.Sprintf(`{"version":1,"listen":"127.0.0.1:0","database":%q,"owner_token_env":"OWNER",
 "recovery_interval":"50ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"10s","retry_base":"1ms","max_attempts":3},"default_execution":%s,
 "workers":[{"id":"worker-1","pool":"local","token_env":"WTOKEN","concurrency":1}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":%s,"budget":{"attempt":{"max_requests":2}}}]}`,
		privateDB(t), exec, exec)
	rg := startRealGate(t, []byte(conf), "")
	f.cfg.GateURL = rg.url()
	gw := meteredGateway(t, f.cfg, fake)
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, Options{Config: f.cfg, Gateway: gw, Executors: map[wire.Kind]Executor{wire.KindCoding: x}})
	defer stop()

	submit := func(instruction string) string {
		task, _ := json.Marshal(map[string]any{"repository_id": "demo", "base_sha": f.base, "instruction": instruction})
		var job struct{ ID string }
		if err := json.Unmarshal(rg.api("POST", "/v1/jobs", task), &job); err != nil {
			t.Fatal(err)
		}
		return job.ID
	}
	ok := rg.waitUsage(submit("model p 2\nwrite hello.txt hi"))
	want := store.Usage{Requests: 2, InputTokens: 80, OutputTokens: 40, CachedTokens: 60}
	if ok.Job.Status != "succeeded" || len(ok.Attempts) != 1 || ok.Attempts[0].Usage == nil || *ok.Attempts[0].Usage != want {
		t.Fatalf("within the budget: %+v %+v", ok.Job, ok.Attempts)
	}

	over := submit("write hello.txt hi\nmodel p 3")
	a := rg.waitUsage(over)
	if a.Job.Status != "failed" || a.Job.FailureCode != wire.FailureBudgetExceeded || len(a.Attempts) != 1 ||
		a.Attempts[0].FailureCode != wire.FailureBudgetExceeded || a.Attempts[0].Usage == nil || *a.Attempts[0].Usage != want {
		t.Fatalf("past the budget: %+v %+v", a.Job, a.Attempts)
	}
	if n := fake.reqs.Load(); n != 4 {
		t.Fatalf("the provider saw %d requests, want 4", n)
	}
	// Stopped (like any cancelled attempt, it claims no candidate).
	stored, err := rg.st.Aggregate(context.Background(), over)
	if err != nil || stored.Attempts[0].CandidateSHA != "" || stored.Job.CandidateSHA != "" {
		t.Fatalf("the refused attempt: %+v %v", stored.Attempts, err)
	}
	f.assertClean()
}

// callThenWait calls the model once, says so, and waits to be released.
type callThenWait struct{ called, release chan struct{} }

func (x *callThenWait) Execute(ctx context.Context, a *Attempt) Report {
	modelCall(a.Grant, `{"model":"m","input":"hi","stream":true}`)
	close(x.called)
	<-x.release
	return Report{Succeeded: true, Output: "done"}
}

// TestHeartbeatsCarryUsage: on a metered lease every heartbeat carries
// the attempt's usage so far, so that the Gate counts it even if no
// result follows (the lease expires or is cancelled).
func TestHeartbeatsCarryUsage(t *testing.T) {
	fake := newFakeResponses(t)
	g := newFakeGate(t)
	cfg := laneConfig(t, g, 1)
	x := &callThenWait{called: make(chan struct{}), release: make(chan struct{})}
	startWorker(t, Options{Config: cfg, Gateway: meteredGateway(t, cfg, fake), Executors: map[wire.Kind]Executor{wire.KindText: x}})
	conn := g.accept()
	e := textLease("j", "a", testPolicy("reference"), "x")
	e.Lease.UsageVersion = wire.UsageV1
	conn.lease(t, e)
	recv(t, x.called, "the model call")
	want := wire.Usage{Requests: 1, InputTokens: 40, OutputTokens: 20, CachedTokens: 30}
	for i := 0; ; i++ {
		hb := conn.next(t)
		if hb.Type != wire.TypeHeartbeat || hb.Heartbeat.Usage == nil {
			t.Fatalf("got %s %+v, want a heartbeat with usage", hb.Type, hb.Heartbeat)
		}
		conn.reply(t, hb.Seq, true)
		if *hb.Heartbeat.Usage == want {
			break
		}
		if i > 100 {
			t.Fatalf("heartbeats carry %+v, want %+v", *hb.Heartbeat.Usage, want)
		}
	}
	close(x.release)
	res := conn.nextOf(t, wire.TypeResult)
	conn.reply(t, res.Seq, true)
	if res.Result.Usage == nil || *res.Result.Usage != want {
		t.Fatalf("result usage %+v", res.Result.Usage)
	}
}
