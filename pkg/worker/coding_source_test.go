package worker

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/secretscan"
	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

const (
	publicURL    = "https://github.com/octo-org/hello.git"
	secondToken  = "second-worker-token-for-tests"
	publicRepoID = "pub"
)

// publicWorld is a real Gate whose repository pub is the public source
// publicURL, read (through a git wrapper the Gate cannot tell from git)
// from a local upstream, and Worker configs registering it as a Gate
// source.
type publicWorld struct {
	t        *testing.T
	root     string
	work     string // the upstream's work tree (push to move upstream)
	upstream string
	prepared string // the Gate's prepared bare repository
	rg       *realGate
	plugin   string
}

func newPublicWorld(t *testing.T, lanesPerWorker int, extra string) *publicWorld {
	t.Helper()
	sysGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is required")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &publicWorld{t: t, root: root, plugin: buildEditPlugin(t)}
	pub := filepath.Join(root, "public")
	up := filepath.Join(root, "up")
	for _, d := range []string{pub, filepath.Join(root, "state")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	w.work = filepath.Join(root, "work")
	gitT(t, root, "init", "-q", "-b", "main", w.work)
	os.WriteFile(filepath.Join(w.work, "README"), []byte("hello\n"), 0o644)
	gitT(t, w.work, "add", "-A")
	gitT(t, w.work, "commit", "-q", "-m", "first")
	w.upstream = filepath.Join(up, "octo-org", "hello.git")
	gitT(t, root, "init", "-q", "--bare", w.upstream)
	gitT(t, w.work, "push", "-q", w.upstream, "main")
	wrapper := filepath.Join(root, "git")
	script := "#!/bin/sh\nexec '" + sysGit + "' -c url.file://" + up + "/.insteadOf=https://github.com/ -c protocol.file.allow=always \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	w.prepared = filepath.Join(pub, source.DirName(publicURL))
	exec := `{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"2m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":64,"git_output_bytes":1048576}`
	conf := fmt.Sprintf(`{"version":1,"listen":"127.0.0.1:0","database":%q,"owner_token_env":"OWNER",
 "recovery_interval":"50ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":3},"default_execution":%s,
 "public_repository_root":%q,"git_executable":%q%s,
 "workers":[{"id":"worker-1","pool":"local","token_env":"WTOKEN","concurrency":%d},
            {"id":"worker-2","pool":"local","token_env":"WTOKEN2","concurrency":%d}],
 "repositories":[{"id":%q,"repository_url":%q,"default_branch":"main","worker_pool":"local","execution":%s}]}`,
		filepath.Join(root, "state", "forge.db"), exec, pub, wrapper, extra, lanesPerWorker, lanesPerWorker, publicRepoID, publicURL, exec)
	w.rg = startRealGateEnv(t, []byte(conf), "", map[string]string{"WTOKEN2": secondToken})
	return w
}

// workerConfig is worker id's config: its own roots, pub as a Gate source.
func (w *publicWorld) workerConfig(id string, lanes int) *Config {
	dir := filepath.Join(w.root, id)
	for _, d := range []string{dir, filepath.Join(dir, "worktrees"), filepath.Join(dir, "runtime")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			w.t.Fatal(err)
		}
	}
	return &Config{
		GateURL: w.rg.url(), ID: id, Concurrency: lanes, HeartbeatInterval: time.Second,
		WorktreeRoot: filepath.Join(dir, "worktrees"), RuntimeRoot: filepath.Join(dir, "runtime"),
		Repositories:              []Repository{{ID: publicRepoID, Gate: true}},
		Plugins:                   []Plugin{{ID: "edit", Argv: []string{w.plugin}}},
		EnvironmentAllowlist:      []string{"PATH"},
		CheckEnvironmentAllowlist: []string{"PATH"},
		Ceilings: Ceilings{PluginTimeout: time.Hour, CheckTimeout: time.Hour, GitTimeout: time.Hour,
			CleanupTimeout: time.Minute, PluginOutputBytes: 1 << 26, CheckOutputBytes: 1 << 26, GitOutputBytes: 1 << 26},
	}
}

// startPublicWorker runs a Worker with cfg and token; it returns its
// events. Its plugins and checks run in the sandbox (the default): the
// Gate layout's attempt repositories and cache work inside it.
func (w *publicWorld) startPublicWorker(cfg *Config, token string) chan Event {
	return w.startPublicWorkerWith(cfg, token, nil)
}

// startPublicWorkerWith is startPublicWorker with a secret set.
func (w *publicWorld) startPublicWorkerWith(cfg *Config, token string, secrets *secretscan.Set) chan Event {
	w.t.Helper()
	reapers := supervise.NewReaperPool(testBinary(w.t))
	w.t.Cleanup(reapers.Close)
	x, err := NewCodingExecutor(cfg, CodingOptions{LookupEnv: lookupIn(codingEnv), Reaper: reapers, Secrets: secrets})
	if err != nil {
		w.t.Fatal(err)
	}
	obs, ev := events()
	stop := startWorker(w.t, Options{Config: cfg, Token: token, Observe: obs, Executors: map[wire.Kind]Executor{wire.KindCoding: x}})
	w.t.Cleanup(stop)
	return ev
}

// advance commits one more file upstream and returns the new tip.
func (w *publicWorld) advance(i int) string {
	name := "up-" + strconv.Itoa(i) + ".txt"
	os.WriteFile(filepath.Join(w.work, name), []byte("upstream "+strconv.Itoa(i)+"\n"), 0o644)
	gitT(w.t, w.work, "add", "-A")
	gitT(w.t, w.work, "commit", "-q", "-m", "upstream "+strconv.Itoa(i))
	gitT(w.t, w.work, "push", "-q", w.upstream, "main")
	return gitT(w.t, w.work, "rev-parse", "HEAD")
}

func (w *publicWorld) submit(base, instruction string) string {
	w.t.Helper()
	task, _ := json.Marshal(map[string]any{"repository_id": publicRepoID, "base_sha": base, "instruction": instruction})
	var job struct{ ID string }
	if err := json.Unmarshal(w.rg.api("POST", "/v1/jobs", task), &job); err != nil {
		w.t.Fatal(err)
	}
	return job.ID
}

type publicJob struct {
	Job struct {
		Status       string `json:"status"`
		CandidateSHA string `json:"candidate_sha"`
		FailureCode  string `json:"failure_code"`
		AttemptCount int    `json:"attempt_count"`
	} `json:"job"`
	Attempts []struct {
		ID       string `json:"id"`
		WorkerID string `json:"worker_id"`
	} `json:"attempts"`
}

func (w *publicWorld) waitJob(id string) publicJob {
	w.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var j publicJob
		if err := json.Unmarshal(w.rg.api("GET", "/v1/jobs/"+id+"/aggregate", nil), &j); err != nil {
			w.t.Fatal(err)
		}
		if j.Job.Status == "succeeded" || j.Job.Status == "failed" {
			return j
		}
	}
	w.t.Fatalf("job %s did not finish", id)
	return publicJob{}
}

// Upstream advances ten times while eight public-source jobs run on two
// Workers (two lanes each; every job holds its lane until released, so
// the first four run across six or more upstream moves, and the Gate
// re-fetches its repository for each later submit). Every job succeeds on its first attempt, each
// candidate's only parent is its own base, and the Gate holds it under
// the job's candidate ref. With the shared bare repository of old, the
// Worker saw the Gate's fetch move refs/heads/main under a running
// attempt (workspace_violation, then invalid_base for the next job).
func TestPublicSourceUpstreamMovesWhileJobsRun(t *testing.T) {
	w := newPublicWorld(t, 2, "")
	// Unconfined: the plugins wait on FIFOs in the test's directory.
	c1, c2 := w.workerConfig("worker-1", 2), w.workerConfig("worker-2", 2)
	c1.Sandbox, c2.Sandbox = SandboxNone, SandboxNone
	ev1 := w.startPublicWorker(c1, testToken)
	ev2 := w.startPublicWorker(c2, secondToken)
	waitEvent(t, ev1, EventConnected)
	waitEvent(t, ev2, EventConnected)

	const jobs, moves = 8, 10
	fifos := make([]string, jobs)
	ids := make([]string, jobs)
	bases := make([]string, jobs)
	// Jobs 0-3 take the four lanes at upstream moves 0-3 and hold them;
	// upstream moves six more times, and jobs 4-7 are submitted (each
	// submit fetches upstream into the Gate's repository) at moves 6-9.
	var tip string
	for m := range moves {
		tip = w.advance(m)
		i := m
		if m >= 6 {
			i = m - 2
		} else if m >= 4 {
			continue
		}
		fifos[i] = filepath.Join(w.root, "release-"+strconv.Itoa(i))
		if err := syscall.Mkfifo(fifos[i], 0o600); err != nil {
			t.Fatal(err)
		}
		bases[i] = tip
		ids[i] = w.submit(tip, "write job-"+strconv.Itoa(i)+".txt done\nawait "+fifos[i])
	}
	// Release every job (each open waits for its plugin to reach await).
	var wg sync.WaitGroup
	for _, f := range fifos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if fd, err := os.OpenFile(f, os.O_WRONLY, 0); err == nil {
				fd.Close()
			}
		}()
	}
	workers := map[string]int{}
	for i, id := range ids {
		j := w.waitJob(id)
		if j.Job.Status != "succeeded" || j.Job.AttemptCount != 1 || len(j.Attempts) != 1 {
			t.Fatalf("job %d: %+v", i, j)
		}
		workers[j.Attempts[0].WorkerID]++
		cand := j.Job.CandidateSHA
		if got := gitT(t, w.prepared, "rev-parse", CandidateRef(id, j.Attempts[0].ID)); got != cand {
			t.Fatalf("job %d: candidate ref %s, candidate %s", i, got, cand)
		}
		if parents := gitT(t, w.prepared, "rev-list", "--parents", "-n", "1", cand); parents != cand+" "+bases[i] {
			t.Fatalf("job %d: candidate and parents %q, base %s", i, parents, bases[i])
		}
		if files := gitT(t, w.prepared, "diff-tree", "--no-commit-id", "--name-only", "-r", bases[i], cand); files != "job-"+strconv.Itoa(i)+".txt" {
			t.Fatalf("job %d: candidate changes %q", i, files)
		}
	}
	wg.Wait()
	if workers["worker-1"] == 0 || workers["worker-2"] == 0 {
		t.Fatalf("jobs per worker %v: both Workers must take public-source jobs", workers)
	}
	if got := gitT(t, w.prepared, "rev-parse", "refs/heads/main"); got != tip {
		t.Fatalf("the Gate's main is %s, upstream's last tip %s", got, tip)
	}
}

// A second job on a warm cache transfers only new objects: the cache
// gains exactly the upstream commit's objects (commit, tree, blob) plus
// nothing of the candidate, whose objects live in the attempt's own
// repository and leave with it.
func TestPublicSourceWarmCacheFetchesOnlyNewObjects(t *testing.T) {
	w := newPublicWorld(t, 1, "")
	cfg := w.workerConfig("worker-1", 1)
	ev := w.startPublicWorker(cfg, testToken)
	waitEvent(t, ev, EventConnected)
	cache := CacheDir(cfg.RuntimeRoot, publicRepoID)

	first := w.advance(0)
	if j := w.waitJob(w.submit(first, "write a.txt a")); j.Job.Status != "succeeded" {
		t.Fatalf("first job %+v", j)
	}
	cold := countObjects(t, cache)
	second := w.advance(1)
	if j := w.waitJob(w.submit(second, "write b.txt b")); j.Job.Status != "succeeded" {
		t.Fatalf("second job %+v", j)
	}
	warm := countObjects(t, cache)
	// upstream 1 adds a commit, a root tree and one blob.
	if warm-cold != 3 {
		t.Fatalf("cache objects %d after the cold job, %d after the warm one: want exactly 3 new", cold, warm)
	}
	if j := w.waitJob(w.submit(second, "write c.txt c")); j.Job.Status != "succeeded" {
		t.Fatalf("third job %+v", j)
	}
	if again := countObjects(t, cache); again != warm {
		t.Fatalf("a job on a cached base fetched: %d objects, was %d", again, warm)
	}
	ents, _ := os.ReadDir(cfg.WorktreeRoot)
	if len(ents) != 0 {
		t.Fatalf("worktree_root keeps %d entries", len(ents))
	}
}

// countObjects counts a repository's objects, loose and packed.
func countObjects(t *testing.T, repo string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(gitT(t, repo, "count-objects", "-v"), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if k == "count" || k == "in-pack" {
			c, _ := strconv.Atoi(v)
			n += c
		}
	}
	return n
}

// A scoped check runs after validation in the attempt's own repository;
// one that changes that repository's git config fails the attempt
// (workspace_violation) and nothing reaches the Gate.
func TestPublicSourceCheckTouchingGitFails(t *testing.T) {
	w := newPublicWorld(t, 1, "")
	ev := w.startPublicWorker(w.workerConfig("worker-1", 1), testToken)
	waitEvent(t, ev, EventConnected)
	base := w.advance(0)
	task, _ := json.Marshal(map[string]any{"repository_id": publicRepoID, "base_sha": base, "instruction": "write a.txt a",
		"tests": [][]string{{"sh", "-c", "printf '[core]\\n\\tfsmonitor = /bin/true\\n' >>../git/config"}}})
	var job struct{ ID string }
	if err := json.Unmarshal(w.rg.api("POST", "/v1/jobs", task), &job); err != nil {
		t.Fatal(err)
	}
	j := w.waitJob(job.ID)
	if j.Job.Status != "failed" || j.Job.FailureCode != wire.FailureWorkspaceViolation {
		t.Fatalf("job %+v", j)
	}
	if refs := gitT(t, w.prepared, "for-each-ref", CandidatePrefix); refs != "" {
		t.Fatalf("a candidate reached the Gate: %s", refs)
	}
}
