package gate

import (
	"strconv"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/source"
)

// validateSources checks the public-source fields' shape: every
// repository_url is the exact public clone URL (no two name the same
// repository, whatever the case), and a Gate with one needs both
// public_repository_root and git_executable.
func (c *Config) validateSources() error {
	seen := map[string]int{}
	public := false
	for i, r := range c.Repositories {
		if r.RepositoryURL == "" {
			continue
		}
		f := "repositories[" + strconv.Itoa(i) + "].repository_url"
		if _, err := source.ParseURL(r.RepositoryURL); err != nil {
			return cfgErr(f, "%v", err)
		}
		key := strings.ToLower(r.RepositoryURL) // GitHub names are case-insensitive
		if j, dup := seen[key]; dup {
			return cfgErr(f, "names the same repository as repositories[%d]", j)
		}
		seen[key] = i
		public = true
	}
	if c.PublicRepositoryRoot != "" && !source.ValidPath(c.PublicRepositoryRoot) {
		return cfgErr("public_repository_root", "must be a canonical absolute path")
	}
	if c.GitExecutable != "" && !source.ValidPath(c.GitExecutable) {
		return cfgErr("git_executable", "must be a canonical absolute path")
	}
	if c.CandidateBundleBytes != 0 && (c.CandidateBundleBytes < MinCandidateBundleBytes || c.CandidateBundleBytes > MaxCandidateBundleBytes) {
		return cfgErr("candidate_bundle_bytes", "must be %d..%d", MinCandidateBundleBytes, int64(MaxCandidateBundleBytes))
	}
	if c.CandidateUnpackedBytes != 0 && (c.CandidateUnpackedBytes < MinCandidateUnpackedBytes || c.CandidateUnpackedBytes > MaxCandidateUnpackedBytes) {
		return cfgErr("candidate_unpacked_bytes", "must be %d..%d", MinCandidateUnpackedBytes, int64(MaxCandidateUnpackedBytes))
	}
	if c.CandidateGitMemoryBytes != 0 && (c.CandidateGitMemoryBytes < MinCandidateGitMemoryBytes || c.CandidateGitMemoryBytes > MaxCandidateGitMemoryBytes) {
		return cfgErr("candidate_git_memory_bytes", "must be %d..%d", MinCandidateGitMemoryBytes, int64(MaxCandidateGitMemoryBytes))
	}
	if c.WorkerSourceReads != 0 && (c.WorkerSourceReads < 1 || c.WorkerSourceReads > MaxWorkerSourceReads) {
		return cfgErr("worker_source_reads", "must be 1..%d", MaxWorkerSourceReads)
	}
	if c.CandidateRefTTL != 0 && (c.CandidateRefTTL.Std() < MinCandidateRefTTL || c.CandidateRefTTL.Std() > MaxCandidateRefTTL) {
		return cfgErr("candidate_ref_ttl", "must be %s..%s", MinCandidateRefTTL, MaxCandidateRefTTL)
	}
	if c.RepackPacks != 0 && (c.RepackPacks < 1 || c.RepackPacks > MaxRepackPacks) {
		return cfgErr("repack_packs", "must be 1..%d", MaxRepackPacks)
	}
	if public && c.PublicRepositoryRoot == "" {
		return cfgErr("public_repository_root", "required when a repository has repository_url")
	}
	if public && c.GitExecutable == "" {
		return cfgErr("git_executable", "required when a repository has repository_url")
	}
	return nil
}

// checkSourceHost checks the public-source fields against the host: the
// root is an existing private directory owned by the Gate's user, and
// git_executable an executable regular file at its canonical path.
func (c *Config) checkSourceHost() error {
	if c.PublicRepositoryRoot != "" {
		if err := source.CheckRoot(c.PublicRepositoryRoot); err != nil {
			return cfgErr("public_repository_root", "%v", err)
		}
	}
	if c.GitExecutable != "" {
		if err := source.CheckGit(c.GitExecutable); err != nil {
			return cfgErr("git_executable", "%v", err)
		}
	}
	return nil
}

// hasPublicSources reports whether some repository is a public source.
func (c *Config) hasPublicSources() bool {
	for _, r := range c.Repositories {
		if r.RepositoryURL != "" {
			return true
		}
	}
	return false
}

// Bounds of candidate_bundle_bytes.
const (
	MinCandidateBundleBytes = 4096
	MaxCandidateBundleBytes = 16 << 30
)

// Bounds of candidate_unpacked_bytes, candidate_git_memory_bytes and
// worker_source_reads.
const (
	MinCandidateUnpackedBytes  = 1 << 20
	MaxCandidateUnpackedBytes  = 64 << 30
	MinCandidateGitMemoryBytes = 64 << 20
	MaxCandidateGitMemoryBytes = 64 << 30
	DefaultWorkerSourceReads   = 2
	MaxWorkerSourceReads       = 64
)

// Bounds of candidate_ref_ttl and repack_packs.
const (
	DefaultCandidateRefTTL = 30 * 24 * time.Hour
	MinCandidateRefTTL     = time.Hour
	MaxCandidateRefTTL     = 10 * 365 * 24 * time.Hour
	DefaultRepackPacks     = 50
	MaxRepackPacks         = 10000
)

// candidateRefTTL is the configured lifetime of a finished job's
// candidate refs.
func (c *Config) candidateRefTTL() time.Duration {
	if c.CandidateRefTTL == 0 {
		return DefaultCandidateRefTTL
	}
	return c.CandidateRefTTL.Std()
}

// repackPacks is the configured pack count past which a prepared
// repository is repacked.
func (c *Config) repackPacks() int {
	if c.RepackPacks == 0 {
		return DefaultRepackPacks
	}
	return c.RepackPacks
}

// candidateBundleBytes is the configured candidate bundle bound.
func (c *Config) candidateBundleBytes() int64 {
	if c.CandidateBundleBytes == 0 {
		return DefaultCandidateBundleBytes
	}
	return c.CandidateBundleBytes
}

// workerSourceReads is the configured bound on one Worker's base bundles
// in flight.
func (c *Config) workerSourceReads() int {
	if c.WorkerSourceReads == 0 {
		return DefaultWorkerSourceReads
	}
	return c.WorkerSourceReads
}
