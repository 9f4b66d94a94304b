package githubfake

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// serveGit answers github.com: only git's smart HTTP routes of an existing
// <owner>/<repo>.git, like GitHub (no dumb protocol, no browsing).
func (s *Server) serveGit(w http.ResponseWriter, r *http.Request) {
	owner, repo, rest, ok := splitRepoPath(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	service, ok := smartService(r, rest)
	if !ok {
		http.NotFound(w, r)
		return
	}
	push := service == "git-receive-pack"
	switch s.fault(owner + "/" + repo) {
	case FaultRedirect:
		target := "https://" + GitHost + "/" + owner + "/" + repo + "-moved.git/" + rest
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusMovedPermanently)
		return
	case FaultAuth:
		challenge(w)
		return
	case FaultError:
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	dir := filepath.Join(s.GitRoot, owner, repo+".git")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		// GitHub answers an unknown repository like a private one.
		challenge(w)
		return
	}
	status := 0
	if s.Auth != nil {
		status = s.Auth(r, owner, repo, push)
	} else if push {
		status = http.StatusUnauthorized
	}
	if status != 0 {
		if status == http.StatusUnauthorized {
			challenge(w)
		} else {
			http.Error(w, "permission denied", status)
		}
		return
	}
	env := []string{
		"GIT_PROJECT_ROOT=" + s.GitRoot,
		"GIT_HTTP_EXPORT_ALL=1",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http.receivepack",
		"GIT_CONFIG_VALUE_0=true",
		"REMOTE_USER=fake",
	}
	if s.GitEnv != nil {
		env = append(env, s.GitEnv(r, owner, repo, push)...)
	}
	h := &cgi.Handler{Path: s.Git, Args: []string{"http-backend"}, Env: env, InheritEnv: []string{"PATH"}}
	if !push || r.Method != http.MethodPost {
		h.ServeHTTP(w, r)
		return
	}
	if s.fault(owner+"/"+repo) == FaultStallPush {
		select {
		case <-time.After(StallPush):
		case <-r.Context().Done():
			return
		}
	}
	before := s.branches(dir)
	if s.fault(owner+"/"+repo) == FaultLosePush {
		h.ServeHTTP(httptest.NewRecorder(), r)
		s.pushed(owner, repo, dir, before)
		dropConnection(w)
		return
	}
	h.ServeHTTP(w, r)
	s.pushed(owner, repo, dir, before)
}

// branches reads the branch heads of the bare repository dir.
func (s *Server) branches(dir string) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Git, "--git-dir="+dir, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/")
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "PATH=/usr/bin:/bin"}
	out, _ := cmd.Output()
	refs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if sha, ref, ok := strings.Cut(line, " "); ok {
			refs[strings.TrimPrefix(ref, "refs/heads/")] = sha
		}
	}
	return refs
}

// pushed tells OnPush which branches a push created or moved.
func (s *Server) pushed(owner, repo, dir string, before map[string]string) {
	if s.OnPush == nil {
		return
	}
	moved := map[string]string{}
	for b, sha := range s.branches(dir) {
		if before[b] != sha {
			moved[b] = sha
		}
	}
	if len(moved) > 0 {
		s.OnPush(owner, repo, moved)
	}
}

func challenge(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
	http.Error(w, "authentication required", http.StatusUnauthorized)
}

// splitRepoPath splits /<owner>/<repo>.git/<rest>.
func splitRepoPath(p string) (owner, repo, rest string, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
	if len(parts) != 3 || !strings.HasSuffix(parts[1], ".git") {
		return "", "", "", false
	}
	owner, repo, rest = parts[0], strings.TrimSuffix(parts[1], ".git"), parts[2]
	if !validName(owner) || !validName(repo) {
		return "", "", "", false
	}
	return owner, repo, rest, true
}

func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// smartService reports which git service a smart-HTTP request asks for.
func smartService(r *http.Request, rest string) (string, bool) {
	switch {
	case rest == "info/refs" && r.Method == http.MethodGet:
		svc := r.URL.Query().Get("service")
		return svc, svc == "git-upload-pack" || svc == "git-receive-pack"
	case (rest == "git-upload-pack" || rest == "git-receive-pack") && r.Method == http.MethodPost:
		return rest, true
	}
	return "", false
}
