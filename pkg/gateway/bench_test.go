package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// Requests per side and round of BenchmarkGatewayOverhead.
const (
	benchRequests = 200
	benchStreams  = 100
)

// BenchmarkGatewayOverhead measures what the gateway adds on loopback:
// every iteration is one round of benchRequests small JSON requests and
// benchStreams streamed ones, sent directly to a TLS upstream (the
// gateway's own transport, keep-alive) and through the gateway (a
// keep-alive HTTP client to it, the gateway's pooled connection to the
// upstream), the two sides alternating which goes first. Per round and
// side: the p50 of the whole request (status line, headers and a JSON
// body read to its end) and the p50 of the time to the first streamed
// byte (the upstream flushes its first event at once). Reported: the
// median over rounds of the gateway's p50 minus the direct p50
// (added-p50-ms, added-ttfb-ms) and the medians of each side.
// scripts/bench-targets.sh runs it with -benchtime Nx (N rounds).
func BenchmarkGatewayOverhead(b *testing.B) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\"}\n\n")
			w.(http.Flusher).Flush()
			io.WriteString(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":3}}}\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"response","status":"completed","usage":{"input_tokens":12,"output_tokens":3}}`)
	}))
	up.TLS = upstreamTLS.Clone()
	up.EnableHTTP2 = true
	up.StartTLS()
	defer up.Close()

	parsed, err := ParseProviders([]FileProvider{provider("p", KindOpenAIResponses, up.URL+"/v1")})
	if err != nil {
		b.Fatal(err)
	}
	g, err := New(parsed, []string{testKey})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	gr := g.Issue(Budget{})
	defer gr.Revoke()

	direct := NewTransport() // what the gateway itself uses upstream
	defer direct.CloseIdleConnections()
	toGateway := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	defer toGateway.CloseIdleConnections()
	sides := []struct {
		name string
		rt   http.RoundTripper
		base string
		auth string
	}{
		{"direct", direct, up.URL + "/v1", "Bearer " + testKey},
		{"gateway", toGateway, ProviderURL(g.URL(), "p"), "Bearer " + gr.Credential()},
	}
	// One warm-up request each: connections and TLS sessions are up.
	for _, s := range sides {
		if _, err := timeRequest(s.rt, s.base+"/responses", s.auth, false); err != nil {
			b.Fatal(err)
		}
	}

	var addedP50, addedTTFB, directP50, gatewayP50, directTTFB, gatewayTTFB []float64
	b.ResetTimer()
	for round := 0; round < b.N; round++ {
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		var p50, ttfb [2]float64
		for _, i := range order {
			s := sides[i]
			var whole, first []float64
			for n := 0; n < benchRequests; n++ {
				d, err := timeRequest(s.rt, s.base+"/responses", s.auth, false)
				if err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				whole = append(whole, d)
			}
			for n := 0; n < benchStreams; n++ {
				d, err := timeRequest(s.rt, s.base+"/stream", s.auth, true)
				if err != nil {
					b.Fatalf("%s stream: %v", s.name, err)
				}
				first = append(first, d)
			}
			p50[i], ttfb[i] = median(whole), median(first)
		}
		directP50, gatewayP50 = append(directP50, p50[0]), append(gatewayP50, p50[1])
		directTTFB, gatewayTTFB = append(directTTFB, ttfb[0]), append(gatewayTTFB, ttfb[1])
		addedP50, addedTTFB = append(addedP50, p50[1]-p50[0]), append(addedTTFB, ttfb[1]-ttfb[0])
	}
	b.StopTimer()
	if u := gr.Usage(); u.Requests < int64(b.N*(benchRequests+benchStreams)) || u.InputTokens == 0 {
		b.Fatalf("the gateway metered %+v", u)
	}
	b.ReportMetric(median(addedP50), "added-p50-ms")
	b.ReportMetric(median(addedTTFB), "added-ttfb-ms")
	b.ReportMetric(median(directP50), "direct-p50-ms")
	b.ReportMetric(median(gatewayP50), "gateway-p50-ms")
	b.ReportMetric(median(directTTFB), "direct-ttfb-ms")
	b.ReportMetric(median(gatewayTTFB), "gateway-ttfb-ms")
}

// timeRequest posts one request and returns its duration in
// milliseconds: to the end of the body, or (firstByte) to the first byte
// of the body, after which the rest is drained.
func timeRequest(rt http.RoundTripper, url, auth string, firstByte bool) (float64, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(`{"model":"m","input":"hi"}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	var d time.Duration
	if firstByte {
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadByte(); err != nil {
			return 0, err
		}
		d = time.Since(start)
		io.Copy(io.Discard, br)
	} else {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, err
		}
		d = time.Since(start)
	}
	return float64(d.Nanoseconds()) / 1e6, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
