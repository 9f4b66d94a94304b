package main

// The public-source layout (DECISIONS 15, pkg/worker coding_attempt.go and
// coding_cache.go). An attempt on a Gate registration runs in a private
// container under worktree_root holding tree/ (the workspace) and git/
// (the attempt's own repository), which borrows the objects of the
// Worker's source cache <runtime_root>/sources/<id>.git through
// objects/info/alternates. The base came from the Gate (GET
// /v1/worker/source), the candidate goes back (PUT /v1/worker/candidate),
// both with the Worker token and the lane's current lease. From its
// workspace the agent finds the rest and tries:
//
//   - cache-read: the cache's config, HEAD and refs (its objects are
//     readable by design: the attempt borrows them);
//   - cache-write: create a file in the cache, its objects (every fan-out
//     directory), objects/info, objects/pack, refs, refs/forge/bases and
//     hooks (made when absent), and in the sources directory; open its
//     config, HEAD, pinned base refs and packs for writing;
//   - cache-chmod: chmod of the cache, its objects, config and packs (to
//     the mode each has, so nothing changes when it succeeds);
//   - alternates: its own repository's alternates extended by every object
//     directory it can name that is not its own (other attempts', the
//     Gate's prepared repositories, other repositories); a reach when git
//     then lists an object it did not list before. The file is put back.
//   - attempt-read, attempt-write: every other attempt's container it can
//     name (its own container's siblings, HOSTILE_ATTEMPTS, and the
//     containers of the concurrent hostile plugins: with HOSTILE_PEERS=N
//     a plugin meets N-1 others at a barrier of the collector, which names
//     their containers, and again once all have probed, so each container
//     exists while the others try it): list it and its git/ and tree/,
//     read their files, create a file in each;
//   - gate-repo-read, gate-repo-write: the same on HOSTILE_GATE_REPOS (the
//     Gate's public repository root and prepared repositories, their refs
//     and packs);
//   - worker-source, worker-candidate: GET the base and PUT a candidate of
//     its own making, without a token, and with every token-like value it
//     found (a Worker token is one the Gate answers 403 rather than 401)
//     for every current lease the Gate's debug API names (with an owner
//     token it found) under every generation-like value (32 hex digits)
//     in the files it read;
//   - worker-replay: with a lane and generation that worked, the leases
//     that are not that lane's current one (other lanes', earlier jobs'
//     attempts). The Gate refuses these whatever the sandbox does.
//
// These functions are this file's alone; run calls probeSourceLayout.

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// maxScan bounds what one file contributes to the generation search.
const maxScan = 32 << 20

// layout is an attempt's directories on a Gate registration.
type layout struct {
	container, gitDir, workspace string
	cache                        string // the source cache ("" when its alternates do not name one)
	alternates                   []byte // its own repository's alternates as found
}

// findLayout reads the Gate layout from the workspace's .git file: a
// gitdir named git beside the workspace.
func findLayout(dir string) (layout, bool) {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return layout{}, false
	}
	g, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || !filepath.IsAbs(g) || filepath.Base(g) != "git" || filepath.Dir(g) != filepath.Dir(dir) {
		return layout{}, false
	}
	l := layout{container: filepath.Dir(g), gitDir: g, workspace: dir}
	l.alternates, _ = os.ReadFile(filepath.Join(g, "objects", "info", "alternates"))
	for _, line := range strings.Split(string(l.alternates), "\n") {
		if filepath.IsAbs(line) && filepath.Base(line) == "objects" {
			l.cache = filepath.Dir(line)
			break
		}
	}
	return l, true
}

// probeSourceLayout runs this file's probes; the Worker endpoints are
// tried from either layout.
func (a *agent) probeSourceLayout(dir string) {
	l, ok := findLayout(dir)
	if ok {
		a.peers = a.barrier("start", l)
		defer a.barrier("end", l)
		a.probeOtherProxies() // net.go: while the others still run
		if l.cache != "" {
			a.probeCache(l.cache)
		}
		a.probeAttempts(l)
		a.probeAlternates(l)
	}
	for _, p := range splitList(os.Getenv("HOSTILE_GATE_REPOS")) {
		a.probeTree("gate-repo", p)
	}
	a.probeWorkerBundles(l)
}

// probeCache tries the Worker's source cache.
func (a *agent) probeCache(cache string) {
	for _, n := range []string{"config", "HEAD", "packed-refs", "description"} {
		p := filepath.Join(cache, n)
		if _, err := os.Lstat(p); err == nil {
			b, err := readSome(p)
			a.add("cache-read", p, err == nil, b)
		}
	}
	for _, d := range []string{"refs", "refs/forge/bases"} {
		_, err := os.ReadDir(filepath.Join(cache, d))
		a.add("cache-read", filepath.Join(cache, d), err == nil, nil)
	}
	dirs := []string{cache, filepath.Dir(cache), "objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/forge/bases"}
	if ents, err := os.ReadDir(filepath.Join(cache, "objects")); err == nil {
		for _, e := range ents {
			if e.IsDir() && len(e.Name()) == 2 {
				dirs = append(dirs, "objects/"+e.Name())
			}
		}
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(cache, d)
		}
		a.createIn("cache-write", d)
	}
	hooks := filepath.Join(cache, "hooks")
	if _, err := os.Lstat(hooks); err == nil {
		a.createIn("cache-write", hooks)
	} else {
		err := os.Mkdir(hooks, 0o755)
		a.add("cache-write", hooks+" (mkdir)", err == nil, nil)
		if err == nil {
			os.Remove(hooks)
		}
	}
	alt := filepath.Join(cache, "objects", "info", "alternates")
	if _, err := os.Lstat(alt); err != nil {
		f, err := os.OpenFile(alt, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		a.add("cache-write", alt+" (create)", err == nil, nil)
		if err == nil {
			f.Close()
			os.Remove(alt)
		}
	}
	files := []string{filepath.Join(cache, "config"), filepath.Join(cache, "HEAD")}
	for _, d := range []string{"refs/forge/bases", "objects/pack"} {
		if ents, err := os.ReadDir(filepath.Join(cache, d)); err == nil {
			for _, e := range ents {
				if e.Type().IsRegular() {
					files = append(files, filepath.Join(cache, d, e.Name()))
				}
			}
		}
	}
	for _, f := range files {
		if _, err := os.Lstat(f); err != nil {
			continue
		}
		// Opened for writing, never written: nothing changes if it opens.
		h, err := os.OpenFile(f, os.O_WRONLY, 0)
		a.add("cache-write", f+" (open)", err == nil, nil)
		if err == nil {
			h.Close()
		}
	}
	for _, p := range append([]string{cache, filepath.Join(cache, "objects")}, files...) {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		a.add("cache-chmod", p, os.Chmod(p, fi.Mode().Perm()) == nil, nil)
	}
}

// createIn creates (and removes) a file in directory d, as kind.
func (a *agent) createIn(kind, d string) {
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		return
	}
	p := filepath.Join(d, "hostile-"+strconv.Itoa(a.self))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	a.add(kind, d, err == nil, nil)
	if err == nil {
		f.Close()
		os.Remove(p)
	}
}

// probeTree lists p (kind-read), reads its files and those of its
// git-like subdirectories (git, tree, refs, refs/heads, objects/pack),
// and creates a file in each directory it names (kind-write).
func (a *agent) probeTree(kind, p string) {
	fi, err := os.Lstat(p)
	if err != nil {
		return
	}
	if !fi.IsDir() {
		b, err := readSome(p)
		a.add(kind+"-read", p, err == nil, b)
		return
	}
	dirs := []string{p}
	for _, s := range []string{"git", "tree", "refs", "refs/heads", "objects/pack", "git/refs/heads"} {
		if fi, err := os.Stat(filepath.Join(p, s)); err == nil && fi.IsDir() {
			dirs = append(dirs, filepath.Join(p, s))
		}
	}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		a.add(kind+"-read", d, err == nil, nil)
		for _, e := range ents {
			if e.Type().IsRegular() {
				q := filepath.Join(d, e.Name())
				b, err := readSome(q)
				a.add(kind+"-read", q, err == nil, b)
				a.targets = append(a.targets, q)
			}
		}
		a.createIn(kind+"-write", d)
	}
}

// otherAttempts are the containers it can name besides its own.
func otherAttempts(l layout, peers []string) []string {
	var out []string
	root := filepath.Dir(l.container)
	if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			if p := filepath.Join(root, e.Name()); e.IsDir() && p != l.container {
				out = append(out, p)
			}
		}
	}
	for _, p := range append(splitList(os.Getenv("HOSTILE_ATTEMPTS")), peers...) {
		if p != l.container {
			out = append(out, p)
		}
	}
	return dedup(out)
}

func (a *agent) probeAttempts(l layout) {
	for _, c := range otherAttempts(l, a.peers) {
		a.probeTree("attempt", c)
	}
}

// foreignObjects are the object directories it can name that are not its
// own or the cache's.
func foreignObjects(l layout, peers []string) []string {
	var cands []string
	for _, c := range otherAttempts(l, peers) {
		cands = append(cands, filepath.Join(c, "git", "objects"))
	}
	for _, p := range append(splitList(os.Getenv("HOSTILE_GATE_REPOS")), splitList(os.Getenv("HOSTILE_READ"))...) {
		cands = append(cands, filepath.Join(p, "objects"), filepath.Join(p, ".git", "objects"))
		if ents, err := os.ReadDir(p); err == nil {
			for _, e := range ents {
				cands = append(cands, filepath.Join(p, e.Name(), "objects"))
			}
		}
	}
	var out []string
	for _, c := range dedup(cands) {
		if c == filepath.Join(l.gitDir, "objects") || (l.cache != "" && c == filepath.Join(l.cache, "objects")) {
			continue
		}
		if fi, err := os.Stat(c); err == nil && fi.IsDir() {
			out = append(out, c)
		}
	}
	return out
}

// probeAlternates points its own repository's alternates at each foreign
// object directory in turn and asks git for every object it can see.
func (a *agent) probeAlternates(l layout) {
	alt := filepath.Join(l.gitDir, "objects", "info", "alternates")
	fi, err := os.Stat(alt)
	if err != nil {
		return
	}
	defer os.WriteFile(alt, l.alternates, fi.Mode().Perm())
	before := objectCount(l.gitDir)
	for _, o := range foreignObjects(l, a.peers) {
		if os.WriteFile(alt, append(bytes.Clone(l.alternates), []byte(o+"\n")...), fi.Mode().Perm()) != nil {
			a.add("alternates", o, false, nil)
			continue
		}
		n := objectCount(l.gitDir)
		a.add("alternates", o, n > before, nil)
	}
}

// objectCount is how many objects git lists in gitDir (alternates
// included), -1 when it fails.
func objectCount(gitDir string) int {
	out, err := gitOut(gitDir, nil, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
	if err != nil {
		return -1
	}
	return strings.Count(string(out), "\n")
}

// gitOut runs git on gitDir without global or system config.
func gitOut(gitDir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"--git-dir=" + gitDir}, args...)...)
	cmd.Env = append(append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"), env...)
	cmd.Stdin = nil
	out, err := cmd.Output()
	return bytes.TrimRight(out, "\n"), err
}

// barrier meets the other hostile plugins (HOSTILE_PEERS of them in all)
// at the collector's barrier name and returns their containers; nothing
// for a check, or without HOSTILE_PEERS.
func (a *agent) barrier(name string, l layout) []string {
	n, err := strconv.Atoi(os.Getenv("HOSTILE_PEERS"))
	addr := os.Getenv("HOSTILE_REPORT")
	if a.who != "plugin" || err != nil || n < 2 || addr == "" {
		return nil
	}
	c, err := net.DialTimeout("unix", addr, 5*time.Second)
	if err != nil {
		return nil
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(45 * time.Second))
	req, _ := json.Marshal(map[string]any{"barrier": name, "container": l.container, "parties": n, "proxy": os.Getenv("HTTPS_PROXY")})
	if _, err := c.Write(append(req, '\n')); err != nil {
		return nil
	}
	var resp struct {
		Peers   []string `json:"peers"`
		Proxies []string `json:"proxies"` // the others' HTTPS_PROXY
	}
	if json.NewDecoder(io.LimitReader(c, 1<<16)).Decode(&resp) != nil {
		return nil
	}
	a.peerProxies = resp.Proxies
	var out []string
	for _, p := range resp.Peers {
		if filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}

// lease is one attempt binding it can name.
type lease struct {
	lane, generation, job, attempt, base string
}

func (b lease) query() string {
	return "lane=" + url.QueryEscape(b.lane) + "&generation=" + b.generation + "&job_id=" + url.QueryEscape(b.job) +
		"&attempt_id=" + url.QueryEscape(b.attempt)
}

// probeWorkerBundles tries the Worker's bundle routes.
func (a *agent) probeWorkerBundles(l layout) {
	addr := os.Getenv("HOSTILE_GATE")
	if addr == "" {
		return
	}
	client := &http.Client{Timeout: 10 * time.Second}
	base := "http://" + addr
	do := func(method, path, token string, body io.Reader) (int, []byte) {
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			return 0, nil
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/x-git-bundle")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, b
	}
	mine := ""
	if l.gitDir != "" {
		if b, err := os.ReadFile(filepath.Join(l.gitDir, "HEAD")); err == nil {
			mine = strings.TrimSpace(string(b))
		}
	}
	// Without a token, and with every token-like value, a made-up binding.
	fake := lease{lane: "worker-1#1", generation: strings.Repeat("0", 32), job: "job", attempt: "attempt", base: mine}
	if mine == "" {
		fake.base = strings.Repeat("0", 40)
	}
	tokens := append([]string{""}, dedup(a.found)...)
	var workerTokens, ownerTokens []string
	for _, t := range tokens {
		code, _ := do(http.MethodGet, "/v1/worker/source?"+fake.query()+"&want="+fake.base, t, nil)
		a.add("worker-source", base+" made-up lease", code == http.StatusOK, nil)
		code, _ = do(http.MethodPut, "/v1/worker/candidate?"+fake.query()+"&candidate="+fake.base+"&tree="+fake.base, t, strings.NewReader(""))
		a.add("worker-candidate", base+" made-up lease", code == http.StatusNoContent, nil)
		if t == "" {
			continue
		}
		if code, _ := do(http.MethodGet, "/v1/worker/source", t, nil); code == http.StatusForbidden {
			workerTokens = append(workerTokens, t)
		}
		if code, _ := do(http.MethodGet, "/v1/debug/workers?limit=100", t, nil); code == http.StatusOK {
			ownerTokens = append(ownerTokens, t)
		}
	}
	if len(workerTokens) == 0 || len(ownerTokens) == 0 {
		return
	}
	current, past := a.leases(do, ownerTokens[0])
	gens := a.generations()
	for _, wt := range workerTokens {
		for _, cur := range current {
			for _, g := range gens {
				b := cur
				b.generation = g
				code, _ := do(http.MethodGet, "/v1/worker/source?"+b.query()+"&want="+b.base, wt, nil)
				if code != http.StatusOK {
					continue
				}
				a.add("worker-source", base+" lease "+b.job+"/"+b.attempt, true, nil)
				a.putCandidate(do, wt, b, l)
				// Another lease under this lane and generation.
				for _, o := range append(append([]lease{}, current...), past...) {
					if o.job == b.job && o.attempt == b.attempt {
						continue
					}
					o.lane, o.generation = b.lane, b.generation
					code, _ := do(http.MethodGet, "/v1/worker/source?"+o.query()+"&want="+o.base, wt, nil)
					a.add("worker-replay", base+" source "+o.job+"/"+o.attempt, code == http.StatusOK, nil)
				}
			}
		}
	}
}

// leases are the current leases the Gate's debug API names (with their
// jobs' bases) and the earlier attempts of its jobs.
func (a *agent) leases(do func(string, string, string, io.Reader) (int, []byte), owner string) (current, past []lease) {
	var jobs struct {
		Jobs []struct {
			ID      string `json:"id"`
			BaseSHA string `json:"base_sha"`
		} `json:"jobs"`
	}
	if code, b := do(http.MethodGet, "/v1/debug/jobs?limit=50", owner, nil); code != http.StatusOK || json.Unmarshal(b, &jobs) != nil {
		return nil, nil
	}
	bases := map[string]string{}
	for _, j := range jobs.Jobs {
		bases[j.ID] = j.BaseSHA
	}
	var lanes struct {
		Lanes []struct {
			Lane      string `json:"lane"`
			JobID     string `json:"job_id"`
			AttemptID string `json:"attempt_id"`
		} `json:"lanes"`
	}
	if code, b := do(http.MethodGet, "/v1/debug/workers?limit=100", owner, nil); code == http.StatusOK && json.Unmarshal(b, &lanes) == nil {
		for _, l := range lanes.Lanes {
			if l.JobID != "" && bases[l.JobID] != "" {
				current = append(current, lease{lane: l.Lane, job: l.JobID, attempt: l.AttemptID, base: bases[l.JobID]})
			}
		}
	}
	for _, j := range jobs.Jobs {
		if j.BaseSHA == "" {
			continue
		}
		var t struct {
			Attempts []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"attempts"`
		}
		if code, b := do(http.MethodGet, "/v1/debug/jobs/"+j.ID, owner, nil); code == http.StatusOK && json.Unmarshal(b, &t) == nil {
			for _, at := range t.Attempts {
				if at.Status != "leased" {
					past = append(past, lease{job: j.ID, attempt: at.ID, base: j.BaseSHA})
				}
			}
		}
	}
	return current, past
}

// generations are the distinct 32-digit pieces of the runs of lowercase
// hex digits in every file it read, from either end of each run.
func (a *agent) generations() []string {
	var out []string
	for _, t := range dedup(a.targets) {
		f, err := os.Open(t)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, maxScan))
		f.Close()
		run := 0
		for i := 0; i <= len(b); i++ {
			if i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] >= 'a' && b[i] <= 'f') {
				run++
				continue
			}
			// Records hold their values side by side: a run may be several
			// ids, or one after a value ending in a hex digit ("worker-1").
			for off := 0; run >= 32 && off+32 <= run; off += 32 {
				out = append(out, string(b[i-run+off:i-run+off+32]), string(b[i-off-32:i-off]))
			}
			run = 0
		}
	}
	return dedup(out)
}

// putCandidate makes a commit of its own on b's base in its own
// repository (the identities the Gate expects), bundles it under b's
// candidate ref and PUTs it.
func (a *agent) putCandidate(do func(string, string, string, io.Reader) (int, []byte), token string, b lease, l layout) {
	target := "/v1/worker/candidate " + b.job + "/" + b.attempt
	if l.gitDir == "" {
		a.add("worker-candidate", target, false, nil)
		return
	}
	tmp, err := os.MkdirTemp("", "hostile-")
	if err != nil {
		a.add("worker-candidate", target, false, nil)
		return
	}
	defer os.RemoveAll(tmp)
	date := strconv.FormatInt(time.Now().Unix(), 10) + " +0000"
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	who := []string{"GIT_AUTHOR_NAME=Agent Forge", "GIT_AUTHOR_EMAIL=forge@example.invalid", "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=Agent Forge", "GIT_COMMITTER_EMAIL=forge@example.invalid", "GIT_COMMITTER_DATE=" + date}
	ref := "refs/agent-forge/candidates/" + b.job + "/" + b.attempt
	blob, err := gitOutIn(l.gitDir, nil, "hostile candidate\n", "hash-object", "-w", "--stdin")
	var tree, commit []byte
	if err == nil {
		_, err = gitOut(l.gitDir, idx, "read-tree", b.base)
	}
	if err == nil {
		_, err = gitOut(l.gitDir, idx, "update-index", "--add", "--cacheinfo", "100644,"+string(blob)+",hostile-candidate.txt")
	}
	if err == nil {
		tree, err = gitOut(l.gitDir, idx, "write-tree")
	}
	if err == nil {
		commit, err = gitOut(l.gitDir, who, "commit-tree", string(tree), "-p", b.base, "-m", "hostile")
	}
	bundle := filepath.Join(tmp, "c.bundle")
	if err == nil {
		_, err = gitOut(l.gitDir, nil, "update-ref", ref, string(commit))
	}
	if err == nil {
		_, err = gitOut(l.gitDir, nil, "bundle", "create", "--quiet", bundle, ref, "^"+b.base)
		// Its own repository must look untouched to the Worker's validation.
		gitOut(l.gitDir, nil, "update-ref", "-d", ref)
	}
	var code int
	if err == nil {
		if f, ferr := os.Open(bundle); ferr == nil {
			code, _ = do(http.MethodPut, "/v1/worker/candidate?"+b.query()+"&candidate="+string(commit)+"&tree="+string(tree), token, f)
			f.Close()
		}
	}
	a.add("worker-candidate", target, code == http.StatusNoContent, nil)
}

// gitOutIn is gitOut with stdin.
func gitOutIn(gitDir string, env []string, stdin string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"--git-dir=" + gitDir}, args...)...)
	cmd.Env = append(append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	return bytes.TrimRight(out, "\n"), err
}
