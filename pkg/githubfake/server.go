package githubfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Host names the server answers.
const (
	GitHost = "github.com"
	APIHost = "api.github.com"
)

// Fault modes for a repository on github.com (see Server.SetFault).
const (
	FaultNone     = ""         // serve normally
	FaultRedirect = "redirect" // 301 to another repository's URL
	FaultAuth     = "auth"     // 401 asking for Basic credentials
	FaultError    = "error"    // 500
	// FaultLosePush: every push is carried out, then the connection is
	// dropped before git hears the outcome.
	FaultLosePush = "lose-push"
	// FaultStallPush: every push waits StallPush before it is served (a
	// slow upstream; lets a test look at the pushing processes).
	FaultStallPush = "stall-push"
)

// StallPush is how long FaultStallPush holds a push.
const StallPush = 15 * time.Second

// Server is the fake. Create it with New; set API, Auth and GitEnv before
// serving.
type Server struct {
	// GitRoot holds the bare repositories as <owner>/<repo>.git.
	GitRoot string
	// Git is the git executable that runs `git http-backend`.
	Git string
	// API answers api.github.com; nil means 404 for every route.
	API http.Handler
	// Auth decides a github.com request after faults are applied: it
	// returns 0 to serve it, or the HTTP status to refuse it with (401
	// adds GitHub's Basic challenge). Nil allows anonymous reads and
	// refuses every push with 401.
	Auth func(r *http.Request, owner, repo string, push bool) int
	// GitEnv, when set, adds environment variables (KEY=value) for the
	// http-backend process of one request, for example to let a
	// repository's pre-receive hook know what the pusher may do.
	GitEnv func(r *http.Request, owner, repo string, push bool) []string
	// OnPush, when set, hears every push that changed branches of
	// owner/repo: the branches created or moved, with their new commits.
	OnPush func(owner, repo string, moved map[string]string)
	// Control is the plain-HTTP control mux (faults, and whatever tests
	// register); serve it on its own loopback listener.
	Control *http.ServeMux

	log *RequestLog

	mu     sync.Mutex
	faults map[string]string // "owner/repo" -> mode
}

// New returns a server for the repositories under gitRoot that appends its
// request log to log (which may be nil to log nothing).
func New(gitRoot, git string, log *RequestLog) *Server {
	s := &Server{GitRoot: gitRoot, Git: git, log: log, faults: map[string]string{}, Control: http.NewServeMux()}
	s.Control.HandleFunc("POST /fault", s.handleFault)
	return s
}

// SetFault makes github.com answer every request for owner/repo with mode
// (FaultNone restores normal service).
func (s *Server) SetFault(ownerRepo, mode string) error {
	switch mode {
	case FaultNone, FaultRedirect, FaultAuth, FaultError, FaultLosePush, FaultStallPush:
	default:
		return fmt.Errorf("unknown fault mode %q", mode)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if mode == FaultNone {
		delete(s.faults, ownerRepo)
	} else {
		s.faults[ownerRepo] = mode
	}
	return nil
}

func (s *Server) fault(ownerRepo string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults[ownerRepo]
}

// handleFault is POST /fault {"repo":"owner/repo","mode":"redirect"}.
func (s *Server) handleFault(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Repo string `json:"repo"`
		Mode string `json:"mode"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || strings.Count(req.Repo, "/") != 1 {
		http.Error(w, "bad fault request", http.StatusBadRequest)
		return
	}
	if err := s.SetFault(req.Repo, req.Mode); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ServeHTTP routes by Host and logs the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	switch strings.ToLower(host) {
	case GitHost:
		s.serveGit(rec, r)
	case APIHost:
		if s.API == nil {
			WriteError(rec, http.StatusNotFound, "Not Found")
		} else {
			s.API.ServeHTTP(rec, r)
		}
	default:
		http.Error(rec, "unknown host", http.StatusMisdirectedRequest)
	}
	s.log.Add(host, r, rec.status)
}

// WriteError answers in GitHub's REST error shape.
func WriteError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{
		"message":           message,
		"documentation_url": "https://docs.github.com/rest",
		"status":            fmt.Sprint(status),
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Flush lets git http-backend's streamed answers through.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
