package gate

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// fixedMessage is the alphabet of the API's fixed error texts: field
// names and reasons from our own schema, never a submitted value.
var fixedMessage = regexp.MustCompile(`^[A-Za-z0-9 _:,.()<>/-]{1,200}$`)

// FuzzSubmit posts any body under any Content-Type to the submit route
// of a running Gate: it answers 201 exactly when the body is a valid task
// for a registered repository under a JSON content type, and otherwise
// the exact error shape with a bounded, fixed message.
func FuzzSubmit(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "submit", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no submit seeds: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "application/json")
		f.Add(b, "")
	}
	f.Add([]byte(`{"input":"x"}`), "text/plain")
	f.Add([]byte(`{"input":"x"}`), "application/json; charset=latin1")
	cfg, sec := testConfig(f, nil)
	tg := startGate(f, cfg, sec, "", nil)
	h := tg.g.Handler()
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/jobs", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testOwnerToken)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		_, parseErr := wire.ParseTask(body)
		if rec.Code == http.StatusCreated {
			if parseErr != nil || !jsonBody(req.Header) {
				t.Fatalf("stored a task the decoder refuses (%v) or under Content-Type %q", parseErr, contentType)
			}
			return
		}
		if parseErr == nil && jsonBody(req.Header) && len(body) <= MaxBodyBytes && rec.Code != http.StatusBadRequest {
			t.Fatalf("valid task answered %d", rec.Code)
		}
		var e errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !bytes.HasSuffix(rec.Body.Bytes(), []byte("}\n")) {
			t.Fatalf("error body %q", rec.Body.Bytes())
		}
		if e.Error.Code == "" || !fixedMessage.MatchString(e.Error.Message) {
			t.Fatalf("error %q / %q is not a fixed bounded text", e.Error.Code, e.Error.Message)
		}
		switch rec.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("status %d for a refused body", rec.Code)
		}
	})
}

func TestSubmitContentType(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	for _, c := range []struct {
		ct   []string
		want int
	}{
		{nil, http.StatusCreated},
		{[]string{"application/json"}, http.StatusCreated},
		{[]string{"Application/JSON; charset=UTF-8"}, http.StatusCreated},
		{[]string{"text/plain"}, http.StatusUnsupportedMediaType},
		{[]string{"application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{[]string{"multipart/form-data; boundary=x"}, http.StatusUnsupportedMediaType},
		{[]string{"application/json; charset=latin1"}, http.StatusUnsupportedMediaType},
		{[]string{"application/json; q=1"}, http.StatusUnsupportedMediaType},
		{[]string{"application/json", "application/json"}, http.StatusUnsupportedMediaType},
		{[]string{"application/json;;"}, http.StatusUnsupportedMediaType},
		{[]string{""}, http.StatusUnsupportedMediaType},
	} {
		req, err := http.NewRequest(http.MethodPost, "http://"+tg.addr+"/v1/jobs", bytes.NewReader([]byte(`{"input":"x"}`)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testOwnerToken)
		for _, v := range c.ct {
			req.Header.Add("Content-Type", v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e errorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Content-Type %q: status %d, want %d", c.ct, resp.StatusCode, c.want)
		}
		if c.want == http.StatusUnsupportedMediaType && e.Error.Code != "unsupported_media_type" {
			t.Errorf("Content-Type %q: code %q", c.ct, e.Error.Code)
		}
	}
}
