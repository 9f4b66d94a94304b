package acceptance

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCLIAgainstMisbehavingServer points the real forge binary at a server
// that answers in every wrong way: the CLI must exit 1, print nothing on
// stdout, never follow a redirect with the token, and never copy raw server
// text (control sequences, huge bodies) to the terminal.
func TestCLIAgainstMisbehavingServer(t *testing.T) {
	t.Parallel()
	token := "TOKEN" + randHex(t, 12)
	// A token of lowercase hex that starts with a letter has the shape of
	// an error code.
	hexToken := "f" + randHex(t, 16)
	const id = "0123456789abcdef0123456789abcdef"
	job := `{"id":"` + id + `","kind":"text","status":"pending","attempt_count":0,"created_at":"2026-11-29T19:20:17.123456Z","updated_at":"2026-11-29T19:20:17.123456Z"}`
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), token) {
			leaked.Store(true)
		}
		w.Write([]byte(job))
	}))
	t.Cleanup(other.Close)
	answers := map[string]http.HandlerFunc{
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
		},
		"huge body": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"id":"` + id + `","kind":"`))
			chunk := []byte(strings.Repeat("a", 1<<20))
			for i := 0; i < 20; i++ {
				w.Write(chunk)
			}
		},
		"wrong job id": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(strings.Replace(job, id, "ffffffffffffffffffffffffffffffff", 1)))
		},
		"unknown status": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(strings.Replace(job, "pending", "exploded", 1)))
		},
		"null field": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(strings.Replace(job, `"kind":"text"`, `"kind":null`, 1)))
		},
		"duplicate key": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(strings.Replace(job, `"kind":"text"`, `"kind":"text","kind":"coding"`, 1)))
		},
		"trailing data": func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(job + "{}")) },
		"not json":      func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hi</html>")) },
		"bad timestamp": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(strings.Replace(job, "2026-11-29T19:20:17.123456Z", "yesterday", 1)))
		},
		"escape sequences in error": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"code":"invalid_task","message":"\u001b[31mEVIL\u001b]0;title\u0007"}}`))
		},
		"error echoing token": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"unauthorized","message":"bad token ` + token + `"}}`))
		},
		"error code echoing token": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"` + hexToken + `","message":"x"}}`))
		},
		"huge error message": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":{"code":"internal","message":"` + strings.Repeat("EVIL", 100000) + `"}}`))
		},
	}
	for name, h := range answers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			tok := token
			if name == "error code echoing token" {
				tok = hexToken
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "FORGE_GATE_URL=" + srv.URL, "FORGE_OWNER_TOKEN=" + tok}
			for _, args := range [][]string{{"status", id}, {"result", id}, {"wait", "-timeout", "2s", "-poll", "10ms", id}} {
				code, out, errOut := runBinary(t, "forge", env, "", args...)
				if code != 1 {
					t.Errorf("%v: exit %d (stdout %.200q, stderr %.200q)", args, code, out, errOut)
				}
				if out != "" {
					t.Errorf("%v: stdout %.200q", args, out)
				}
				if strings.Contains(errOut, token) || strings.Contains(errOut, hexToken) || strings.Contains(errOut, "\x1b") || strings.Contains(errOut, "\a") ||
					strings.Contains(errOut, "EVILEVIL") || len(errOut) > 4096 {
					t.Errorf("%v: unsafe stderr %.300q", args, errOut)
				}
			}
		})
	}
	t.Cleanup(func() {
		if leaked.Load() {
			t.Error("the CLI followed a redirect and sent the token to another server")
		}
	})
}
