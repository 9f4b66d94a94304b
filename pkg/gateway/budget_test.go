package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestUsagePastTheBudgetExceedsTheGrant: one answer whose usage goes
// past the token budget exceeds the grant at once, without waiting for
// a refused request: Exceeded is closed and the next request is refused
// unforwarded.
func TestUsagePastTheBudgetExceedsTheGrant(t *testing.T) {
	up, s := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"input_tokens":100,"output_tokens":20}}`)
	})
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	gr := g.Issue(Budget{MaxTokens: 100})
	defer gr.Revoke()
	if resp, _ := do(t, post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}")); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	select {
	case <-gr.Exceeded():
	default:
		t.Fatal("120 tokens on a budget of 100 did not exceed the grant")
	}
	resp, body := do(t, post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}"))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "budget_exceeded") || s.count() != 1 {
		t.Fatalf("after the overrun: %d %s, upstream saw %d", resp.StatusCode, body, s.count())
	}
}

// TestParallelRequestsCannotOverrun: a grant with a token budget has one
// request in flight at a time, so four requests sent at once cannot
// each spend what is left. Each answer costs 80 tokens of a budget of
// 100: the first is forwarded, the second (80 < 100) too, which
// exceeds the grant (160); the other two are refused unforwarded. The
// upstream holds each request until all four arrived (or 300 ms
// passed): requests forwarded together would meet there.
func TestParallelRequestsCannotOverrun(t *testing.T) {
	var inFlight, most atomic.Int64
	var arrived sync.WaitGroup
	arrived.Add(4)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	up, s := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		arrived.Done()
		select {
		case <-all:
		case <-time.After(300 * time.Millisecond):
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"input_tokens":60,"output_tokens":20}}`)
	})
	defer func() {
		for i := s.count(); i < 4; i++ {
			arrived.Done() // the refused ones never arrive
		}
	}()
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	gr := g.Issue(Budget{MaxTokens: 100})
	defer gr.Revoke()
	statuses := make(chan int, 4)
	for i := 0; i < 4; i++ {
		go func() {
			resp, err := http.DefaultTransport.RoundTrip(post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}"))
			if err != nil {
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	got := map[int]int{}
	for i := 0; i < 4; i++ {
		got[<-statuses]++
	}
	if most.Load() != 1 {
		t.Errorf("%d requests of one grant were in flight at once", most.Load())
	}
	if got[200] != 2 || got[http.StatusForbidden] != 2 || s.count() != 2 {
		t.Errorf("answers %v, upstream saw %d requests; want two forwarded, two refused", got, s.count())
	}
	if !gr.BudgetExceeded() {
		t.Error("the grant is not exceeded")
	}
	if u := gr.Usage(); u.Requests != 2 || u.Tokens() != 160 {
		t.Errorf("usage %+v", u)
	}
}

// TestExceededCutsRequestsInFlight: once the budget refuses a request,
// the grant's requests still in flight are cut (a request budget: no
// bound on parallel requests, the first one streams on).
func TestExceededCutsRequestsInFlight(t *testing.T) {
	cut := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	up, _ := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			close(cut)
		}
	})
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	gr := g.Issue(Budget{MaxRequests: 1})
	defer gr.Revoke()
	resp, err := http.DefaultTransport.RoundTrip(post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if r, body := do(t, post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}")); r.StatusCode != http.StatusForbidden {
		t.Fatalf("second request: %d %s", r.StatusCode, body)
	}
	select {
	case <-cut:
	case <-time.After(10 * time.Second):
		t.Fatal("the request in flight was not cut when the budget was spent")
	}
	if _, err := io.ReadAll(br); err == nil {
		t.Error("the cut stream ended cleanly")
	}
}

// TestUnmeteredAnswersExceedATokenBudget: on a grant with a token
// budget, an answer that may have cost tokens but whose usage the meter
// could not read exceeds the grant (its cost is unknown, so it may have
// spent the rest): a stream the client cuts before its usage event, a
// usage event over the meter's line bound, a JSON answer without usage,
// a request cut before its answer's headers. Answers that cost nothing
// (a GET, a token count, an error status) and grants without a token
// budget are unchanged.
func TestUnmeteredAnswersExceedATokenBudget(t *testing.T) {
	big := `{"type":"response.completed","response":{"output":"` + strings.Repeat("x", maxMeteredLine) + `","usage":{"input_tokens":1,"output_tokens":1}}}`
	up, _ := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cut": // a stream that waits for the client to leave
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"type\":\"response.output_text.delta\",\"delta\":\"all of it\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/big":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: "+big+"\n\n")
		case "/slow": // the answer's headers never come before the cut
			<-r.Context().Done()
		case "/error":
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"slow down"}}`)
		default: // a 2xx answer without usage
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"r","status":"queued"}`)
		}
	})
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	cutRequest := func(gr *Grant, path string, wantHeaders bool) {
		ctx, cancel := context.WithCancel(context.Background())
		req := post(t, ProviderURL(g.URL(), "openai")+path, gr.Credential(), "{}").WithContext(ctx)
		if !wantHeaders {
			go func() { time.Sleep(100 * time.Millisecond); cancel() }()
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err == nil {
			bufio.NewReader(resp.Body).ReadString('\n')
			cancel() // the client has what it wanted and leaves
			resp.Body.Close()
		}
		cancel()
	}
	for _, c := range []struct {
		name   string
		budget Budget
		call   func(gr *Grant)
		want   bool
	}{
		{"stream cut by the client", Budget{MaxTokens: 1000}, func(gr *Grant) { cutRequest(gr, "/cut", true) }, true},
		{"usage over the line bound", Budget{MaxTokens: 1000}, func(gr *Grant) { do(t, post(t, ProviderURL(g.URL(), "openai")+"/big", gr.Credential(), "{}")) }, true},
		{"no usage", Budget{MaxTokens: 1000}, func(gr *Grant) { do(t, post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}")) }, true},
		{"cut before the headers", Budget{MaxTokens: 1000}, func(gr *Grant) { cutRequest(gr, "/slow", false) }, true},
		{"a GET", Budget{MaxTokens: 1000}, func(gr *Grant) {
			req, _ := http.NewRequest("GET", ProviderURL(g.URL(), "openai")+"/models", nil)
			req.Header.Set("Authorization", "Bearer "+gr.Credential())
			do(t, req)
		}, false},
		{"a token count", Budget{MaxTokens: 1000}, func(gr *Grant) {
			do(t, post(t, ProviderURL(g.URL(), "openai")+"/responses/input_tokens", gr.Credential(), "{}"))
		}, false},
		{"an error status", Budget{MaxTokens: 1000}, func(gr *Grant) { do(t, post(t, ProviderURL(g.URL(), "openai")+"/error", gr.Credential(), "{}")) }, false},
		{"no token budget", Budget{MaxRequests: 10}, func(gr *Grant) { cutRequest(gr, "/cut", true) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			gr := g.Issue(c.budget)
			defer gr.Revoke()
			c.call(gr)
			// The gateway settles the request after the client left:
			// wait for it (bounded) where it must exceed.
			if c.want {
				select {
				case <-gr.Exceeded():
				case <-time.After(10 * time.Second):
				}
			}
			if gr.BudgetExceeded() != c.want || gr.Unmetered() != c.want {
				t.Fatalf("exceeded %v, unmetered %v; want %v", gr.BudgetExceeded(), gr.Unmetered(), c.want)
			}
			resp, body := do(t, post(t, ProviderURL(g.URL(), "openai")+"/error", gr.Credential(), "{}"))
			if c.want != (resp.StatusCode == http.StatusForbidden && strings.Contains(body, "budget_exceeded")) {
				t.Fatalf("the next request: %d %s", resp.StatusCode, body)
			}
		})
	}
}
