package browsertest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/debugview"
	"github.com/0k-lab/agent-forge/pkg/debugview/readertest"
)

const (
	browserToken = "owner-token-7d2e-BROWSER-SECRET"
	wrongToken   = "wrong-token-value"
)

// chromiumPath finds the browser: $FORGE_CHROMIUM, else the first of the
// usual Chromium/Chrome command names on PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FORGE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: install the Debian package chromium or set FORGE_CHROMIUM")
	return ""
}

// artifactDir is where the screenshot goes: $FORGE_ARTIFACT_DIR if set.
func artifactDir(t testing.TB) string {
	if d := os.Getenv("FORGE_ARTIFACT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// recorder keeps every request the server saw.
type recorder struct {
	mu   sync.Mutex
	reqs []seenRequest
}

type seenRequest struct {
	uri    string
	header http.Header
}

func (r *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, seenRequest{req.RequestURI, req.Header.Clone()})
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
}

func (r *recorder) all() []seenRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seenRequest(nil), r.reqs...)
}

// sampleData is three succeeded text jobs and two lanes.
func sampleData() readertest.Dataset {
	at := time.Date(2026, 11, 29, 19, 20, 17, 123456000, time.UTC)
	d := readertest.Dataset{Attempts: map[string][]debugview.Attempt{}, Events: map[string][]debugview.Event{}}
	for i := 3; i >= 1; i-- {
		id := fmt.Sprintf("j_%04d", i)
		created := at.Add(time.Duration(i) * time.Second)
		d.Jobs = append(d.Jobs, debugview.Job{ID: id, Kind: "text", Status: "succeeded", AttemptCount: 1, CreatedAt: created, UpdatedAt: created.Add(time.Second)})
		d.Attempts[id] = []debugview.Attempt{{ID: "a_" + id, Ordinal: 1, Status: "succeeded", Lane: "worker-1#1",
			LeasedAt: created.Add(100 * time.Millisecond), DeadlineAt: created.Add(30 * time.Second), CompletedAt: created.Add(time.Second)}}
		d.Events[id] = []debugview.Event{
			{Seq: 1, Type: "submitted", At: created},
			{Seq: 2, Type: "leased", At: created.Add(100 * time.Millisecond), Attempt: 1},
			{Seq: 3, Type: "succeeded", At: created.Add(time.Second), Attempt: 1},
		}
	}
	d.Lanes = []debugview.Lane{
		{Lane: "worker-1", WorkerID: "worker-1", Pool: "default", Connected: true, ConnectedAt: at},
		{Lane: "worker-1#1", WorkerID: "worker-1", Pool: "default", Connected: false, ConnectedAt: at, DisconnectedAt: at.Add(time.Minute)},
	}
	return d
}

// page is one attached browser tab.
type page struct {
	t       *testing.T
	b       *Browser
	session string
}

func (p *page) call(ctx context.Context, method string, params, result any) {
	p.t.Helper()
	if err := p.b.Call(ctx, p.session, method, params, result); err != nil {
		p.t.Fatal(err)
	}
}

// eval runs a JavaScript expression (awaiting a returned promise) and
// decodes its JSON-serializable value into out.
func (p *page) eval(ctx context.Context, expr string, out any) {
	p.t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &res)
	if res.ExceptionDetails != nil {
		p.t.Fatalf("javascript exception: %s", res.ExceptionDetails.Text)
	}
	if out != nil {
		if err := json.Unmarshal(res.Result.Value, out); err != nil {
			p.t.Fatalf("decode %s: %v", res.Result.Value, err)
		}
	}
}

// waitFor resolves once the JavaScript condition holds, driven by DOM
// mutations rather than polling.
func (p *page) waitFor(ctx context.Context, cond string) {
	p.t.Helper()
	expr := `new Promise((resolve) => {
  const ok = () => { try { return Boolean(` + cond + `); } catch (e) { return false; } };
  if (ok()) { resolve(true); return; }
  const obs = new MutationObserver(() => { if (ok()) { obs.disconnect(); resolve(true); } });
  obs.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
})`
	var done bool
	p.eval(ctx, expr, &done)
	if !done {
		p.t.Fatalf("condition never held: %s", cond)
	}
}

// openPage launches Chromium, attaches to a fresh tab with the Page,
// Network, Runtime and Log domains enabled, and loads url. The caller
// closes the Browser.
func openPage(ctx context.Context, t *testing.T, url string) (*Browser, *page) {
	t.Helper()
	b, err := Launch(chromiumPath(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.Call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		b.Close()
		t.Fatal(err)
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		b.Close()
		t.Fatal(err)
	}
	p := &page{t: t, b: b, session: attached.SessionID}
	for _, domain := range []string{"Page.enable", "Network.enable", "Runtime.enable", "Log.enable"} {
		p.call(ctx, domain, nil, nil)
	}
	from := len(b.Events())
	p.call(ctx, "Page.navigate", map[string]any{"url": url}, nil)
	if _, _, err := b.WaitEvent(ctx, "Page.loadEventFired", from); err != nil {
		b.Close()
		t.Fatal(err)
	}
	return b, p
}

// login types the token into the password field and connects.
func (p *page) login(ctx context.Context, token string) {
	p.t.Helper()
	p.eval(ctx, `document.getElementById('token').focus(), true`, nil)
	p.call(ctx, "Input.insertText", map[string]any{"text": token}, nil)
	var typed int
	p.eval(ctx, `document.getElementById('token').value.length`, &typed)
	if typed != len(token) {
		p.t.Fatalf("token field holds %d characters after typing", typed)
	}
	p.eval(ctx, `document.getElementById('connect').click(), true`, nil)
}

// text returns an element's textContent.
func (p *page) text(ctx context.Context, expr string) string {
	p.t.Helper()
	var s string
	p.eval(ctx, expr+`.textContent`, &s)
	return s
}

// screenshot saves a PNG of the page as an artifact named name.
func (p *page) screenshot(ctx context.Context, name string) {
	p.t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	p.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	img, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		p.t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	if err != nil || cfg.Width < 200 || cfg.Height < 200 {
		p.t.Fatalf("screenshot: %v %dx%d", err, cfg.Width, cfg.Height)
	}
	path := filepath.Join(artifactDir(p.t), name)
	if err := os.WriteFile(path, img, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
}

func TestViewerInHeadlessChromium(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Live activity for the newest job's attempt, in the real in-memory
	// activity store.
	acts := activity.NewStore(time.Now)
	liveLease := activity.Lease{JobID: "j_0003", AttemptID: "a_j_0003", Ordinal: 1, Lane: "worker-1#1",
		Generation: strings.Repeat("5e", 16), Version: activity.Version, Deadline: time.Now().Add(time.Hour)}
	record := func(stage activity.Stage) {
		t.Helper()
		if _, err := acts.Record(liveLease.Lane, liveLease.Generation, activity.Payload{JobID: liveLease.JobID,
			AttemptID: liveLease.AttemptID, Version: activity.Version, Stage: stage}); err != nil {
			t.Fatal(err)
		}
	}
	if !acts.Begin(liveLease) {
		t.Fatal("lease not tracked")
	}
	record(activity.StageAnalyzing)

	rec := &recorder{}
	viewer := debugview.New(readertest.NewMemory(sampleData()), func(r *http.Request) bool {
		return r.Header.Get("Authorization") == "Bearer "+browserToken
	}, time.Now, debugview.WithActivity(acts))
	mux := http.NewServeMux()
	mux.Handle("/debug/", viewer)
	mux.Handle("/v1/debug/", viewer)
	srv := httptest.NewServer(rec.wrap(mux))
	defer srv.Close()

	b, p := openPage(ctx, t, srv.URL+"/debug/")
	defer b.Close()

	// A wrong token is refused: the field is cleared and nothing is shown.
	p.eval(ctx, `document.getElementById('token').focus(), true`, nil)
	p.call(ctx, "Input.insertText", map[string]any{"text": wrongToken}, nil)
	p.eval(ctx, `document.getElementById('connect').click(), true`, nil)
	p.waitFor(ctx, `document.getElementById('status').textContent === 'error: the Gate refused the token'`)
	var afterRefusal struct {
		Field string `json:"field"`
		Main  bool   `json:"main"`
		Rows  int    `json:"rows"`
	}
	p.eval(ctx, `({field: document.getElementById('token').value, main: document.getElementById('main').hidden, rows: document.querySelectorAll('#jobs-body tr').length})`, &afterRefusal)
	if afterRefusal.Field != "" || !afterRefusal.Main || afterRefusal.Rows != 0 {
		t.Fatalf("after a refused token: %+v", afterRefusal)
	}

	// Type the token into the password field and connect.
	p.eval(ctx, `document.getElementById('token').focus(), true`, nil)
	p.call(ctx, "Input.insertText", map[string]any{"text": browserToken}, nil)
	var typed int
	p.eval(ctx, `document.getElementById('token').value.length`, &typed)
	if typed != len(browserToken) {
		t.Fatalf("token field holds %d characters after typing", typed)
	}
	p.eval(ctx, `document.getElementById('connect').click(), true`, nil)
	p.waitFor(ctx, `document.querySelectorAll('#jobs-body tr').length === 3 && document.querySelectorAll('#lanes-body tr').length === 2`)

	var fieldValue string
	p.eval(ctx, `document.getElementById('token').value`, &fieldValue)
	if fieldValue != "" {
		t.Fatal("the token field was not cleared")
	}
	var firstJob, lanes string
	p.eval(ctx, `document.querySelector('#jobs-body tr').textContent`, &firstJob)
	p.eval(ctx, `document.getElementById('lanes-body').textContent`, &lanes)
	if !strings.Contains(firstJob, "j_0003") || !strings.Contains(firstJob, "succeeded") {
		t.Fatalf("first job row %q", firstJob)
	}
	if !strings.Contains(lanes, "connected") || !strings.Contains(lanes, "disconnected") || !strings.Contains(lanes, "worker-1#1") {
		t.Fatalf("lanes %q", lanes)
	}

	// Open the newest job and see its timeline.
	p.eval(ctx, `document.querySelector('#jobs-body tr').click(), true`, nil)
	p.waitFor(ctx, `!document.getElementById('drawer').hidden && document.querySelectorAll('#timeline li').length === 3`)
	var timeline, drawerTitle, live string
	p.eval(ctx, `document.getElementById('timeline').textContent`, &timeline)
	p.eval(ctx, `document.getElementById('drawer-title').textContent`, &drawerTitle)
	p.eval(ctx, `document.getElementById('live').textContent`, &live)
	for _, want := range []string{"submitted", "leased", "attempt 1", "succeeded", "2026-11-29T19:20:20.123456Z"} {
		if !strings.Contains(timeline, want) {
			t.Fatalf("timeline %q lacks %q", timeline, want)
		}
	}
	if drawerTitle != "Job j_0003" || !strings.Contains(live, "Live activity") {
		t.Fatalf("drawer title %q, live %q", drawerTitle, live)
	}
	// The live section shows the current stage and, on its own 5 s
	// refresh, picks up the next one without reopening the drawer.
	p.waitFor(ctx, `document.querySelectorAll('#live-list li').length === 1 && document.getElementById('live-note').textContent.startsWith('Current stage: analyzing')`)
	record(activity.StageEditing)
	p.waitFor(ctx, `document.querySelectorAll('#live-list li').length === 2 && document.getElementById('live-note').textContent.startsWith('Current stage: editing')`)
	if tl := p.text(ctx, `document.getElementById('timeline')`); strings.Contains(tl, "editing") || strings.Contains(tl, "analyzing") {
		t.Fatal("live activity leaked into the timeline")
	}

	// Nothing was persisted anywhere the page could reach again.
	var persisted struct {
		Cookie  string `json:"cookie"`
		Local   int    `json:"local"`
		Session int    `json:"session"`
		Href    string `json:"href"`
	}
	p.eval(ctx, `({cookie: document.cookie, local: localStorage.length, session: sessionStorage.length, href: location.href})`, &persisted)
	if persisted.Cookie != "" || persisted.Local != 0 || persisted.Session != 0 || persisted.Href != srv.URL+"/debug/" {
		t.Fatalf("page state %+v", persisted)
	}
	var cookies struct {
		Cookies []json.RawMessage `json:"cookies"`
	}
	p.call(ctx, "Network.getCookies", nil, &cookies)
	if len(cookies.Cookies) != 0 {
		t.Fatalf("%d cookies set", len(cookies.Cookies))
	}

	p.screenshot(ctx, "debugview.png")

	checkRequests(t, b.Events(), rec.all())
}

// checkRequests asserts, from the browser's and the server's view, that the
// token travelled only as the Authorization header of the JSON requests,
// and that the page raised no Content-Security-Policy violation.
func checkRequests(t *testing.T, events []Event, served []seenRequest) {
	t.Helper()
	apiRequests := 0
	for _, ev := range events {
		raw := string(ev.Params)
		switch ev.Method {
		case "Network.requestWillBeSent":
			var p struct {
				Request struct {
					URL      string            `json:"url"`
					Method   string            `json:"method"`
					Headers  map[string]string `json:"headers"`
					PostData string            `json:"postData"`
				} `json:"request"`
			}
			if err := json.Unmarshal(ev.Params, &p); err != nil {
				t.Fatal(err)
			}
			r := p.Request
			if strings.Contains(r.URL, browserToken) || strings.Contains(r.PostData, browserToken) || r.Method != http.MethodGet {
				t.Fatalf("request %s %s carried the token outside the header or was not GET", r.Method, r.URL)
			}
			isAPI := strings.Contains(r.URL, "/v1/debug/")
			for name, v := range r.Headers {
				if !strings.Contains(v, browserToken) {
					continue
				}
				if !strings.EqualFold(name, "Authorization") || v != "Bearer "+browserToken || !isAPI {
					t.Fatalf("token in header %s of %s", name, r.URL)
				}
			}
			if isAPI {
				apiRequests++
				if auth := r.Headers["Authorization"]; auth != "Bearer "+browserToken && auth != "Bearer "+wrongToken {
					t.Fatalf("API request without the bearer header: %s", r.URL)
				}
			}
		case "Network.requestWillBeSentExtraInfo":
			var p struct {
				Headers map[string]string `json:"headers"`
			}
			json.Unmarshal(ev.Params, &p)
			for name, v := range p.Headers {
				if strings.Contains(v, browserToken) && (!strings.EqualFold(name, "Authorization") || v != "Bearer "+browserToken) {
					t.Fatalf("token in wire header %s", name)
				}
				if strings.EqualFold(name, "Cookie") {
					t.Fatal("a cookie was sent")
				}
			}
		case "Log.entryAdded", "Runtime.consoleAPICalled", "Runtime.exceptionThrown":
			if strings.Contains(raw, "Content Security Policy") || ev.Method == "Runtime.exceptionThrown" {
				t.Fatalf("page problem: %s", raw)
			}
		}
	}
	if apiRequests < 3 {
		t.Fatalf("only %d API requests observed", apiRequests)
	}
	sawShell := false
	for _, r := range served {
		if strings.Contains(r.uri, browserToken) {
			t.Fatal("token in a served URL")
		}
		for name, vals := range r.header {
			for _, v := range vals {
				if strings.Contains(v, browserToken) && (name != "Authorization" || !strings.HasPrefix(r.uri, "/v1/debug/")) {
					t.Fatalf("token in served header %s", name)
				}
			}
		}
		if r.uri == "/debug/" {
			sawShell = true
			if r.header.Get("Authorization") != "" {
				t.Fatal("the shell request carried credentials")
			}
		}
	}
	if !sawShell {
		t.Fatal("the shell was never served")
	}
}
