package install

import "testing"

// Exported for the external tests of this directory (forge doctor's,
// which cannot live in package install: doctor imports it).

// TestEnv is a temporary machine with fake accounts and services.
type TestEnv = env

// NewTestEnv returns a fresh test machine.
func NewTestEnv(t *testing.T) *TestEnv { return newEnv(t) }

// WriteTestRelease writes a release set of script binaries.
func WriteTestRelease(t *testing.T, version, commit string) Request {
	return writeRelease(t, releaseOpt{version: version, commit: commit})
}

func (e *env) TestHost() Host          { return e.h }
func (e *env) RootDir() string         { return e.root }
func (e *env) Digest() string          { return e.digest() }
func (e *env) MustInstall(req Request) { e.mustRun(req) }
func (e *env) SetActive(unit string, active bool) {
	e.h.svc.mu.Lock()
	defer e.h.svc.mu.Unlock()
	if active {
		e.h.svc.active[unit] = true
	} else {
		delete(e.h.svc.active, unit)
	}
}

func (e *env) SetImpostor(pid int) { e.h.svc.mu.Lock(); e.h.svc.impostor = pid; e.h.svc.mu.Unlock() }
func (e *env) AuthSeen() int       { e.h.svc.mu.Lock(); defer e.h.svc.mu.Unlock(); return e.h.svc.authSeen }
func (e *env) SetDropIns(unit string, paths []string) {
	e.h.svc.mu.Lock()
	defer e.h.svc.mu.Unlock()
	e.h.svc.dropIns = map[string][]string{unit: paths}
}
func (e *env) SetMainExe(unit, exe string) {
	e.h.svc.mu.Lock()
	defer e.h.svc.mu.Unlock()
	e.h.svc.exe = map[string]string{unit: exe}
}
func (e *env) SetMainCgroup(unit, cg string) {
	e.h.svc.mu.Lock()
	defer e.h.svc.mu.Unlock()
	e.h.svc.cgroup = map[string]string{unit: cg}
}
func (e *env) SetAccount(name string, a AccountInfo) {
	e.h.acc.mu.Lock()
	defer e.h.acc.mu.Unlock()
	e.h.acc.users[name] = a
}
