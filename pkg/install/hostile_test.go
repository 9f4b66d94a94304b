package install

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runBounded runs the installer and fails the test if it does not return
// within a generous bound (a hang on a hostile input is the bug).
func (e *env) runBounded(t *testing.T, req Request, unblock func()) (error, string) {
	t.Helper()
	type result struct {
		err error
		out string
	}
	done := make(chan result, 1)
	go func() { err, out := e.run(req); done <- result{err, out} }()
	select {
	case r := <-done:
		return r.err, r.out
	case <-time.After(20 * time.Second):
		unblock()
		<-done
		t.Fatal("the installer hung on a hostile release set")
		return nil, ""
	}
}

// A release directory holding anything but SHA256SUMS and the six Linux
// archives, or holding them as anything but regular files, is refused
// without blocking and without changing anything.
func TestHostileAssetDirectoryIsRefused(t *testing.T) {
	cases := map[string]func(t *testing.T, dir string) (unblock func()){
		"seventh archive": func(t *testing.T, dir string) func() {
			os.WriteFile(filepath.Join(dir, "agent-forge-worker_v1.1.0_darwin_arm64.tar.gz"), []byte("x"), 0o644)
			return func() {}
		},
		"seventh file": func(t *testing.T, dir string) func() {
			os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644)
			return func() {}
		},
		"the forge binary": func(t *testing.T, dir string) func() {
			os.WriteFile(filepath.Join(dir, "forge"), []byte("#!/bin/sh\n"), 0o755)
			return func() {}
		},
		"other version's SBOM": func(t *testing.T, dir string) func() {
			os.WriteFile(filepath.Join(dir, "agent-forge_v1.0.0_linux.spdx.json"), []byte("{}"), 0o644)
			return func() {}
		},
		"hidden file": func(t *testing.T, dir string) func() {
			os.Mkdir(filepath.Join(dir, ".cache"), 0o755)
			return func() {}
		},
		"fifo SHA256SUMS": func(t *testing.T, dir string) func() {
			p := filepath.Join(dir, "SHA256SUMS")
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return func() { openAndClose(p) }
		},
		"fifo archive": func(t *testing.T, dir string) func() {
			p := filepath.Join(dir, archiveName("gate", "v1.1.0", runtime.GOARCH))
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return func() { openAndClose(p) }
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			e := installed(t, writeRelease(t, v1))
			before, beforeState := e.digest(), e.state()
			req := with(writeRelease(t, v2), true, true)
			unblock := mutate(t, req.AssetDir)
			err, _ := e.runBounded(t, req, unblock)
			ie := wantCode(t, err, ExitRefused)
			if ie.Stage != "manifest" && ie.Stage != "trust" && ie.Stage != "staging" {
				t.Fatalf("stage %s (%s)", ie.Stage, ie.Msg)
			}
			if e.digest() != before || e.state() != beforeState {
				t.Fatal("a refusal changed something")
			}
		})
	}
}

// The release's own SBOM, published beside the archives, may sit in the
// asset directory (it is never read).
func TestAssetDirectoryMayHoldTheReleaseSBOM(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	req := with(writeRelease(t, v2), true, true)
	if err := os.WriteFile(filepath.Join(req.AssetDir, "agent-forge_v1.1.0_linux.spdx.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err, out := e.run(req); err != nil {
		t.Fatalf("upgrade with the SBOM present: %v (%s)", err, out)
	}
}

func openAndClose(p string) {
	if fd, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
		fd.Close()
	}
}

// The doctor and the installer read the installation's own files without
// blocking: a FIFO swapped in for the Gate environment file is reported,
// never waited on.
func TestOwnerTokenDoesNotBlockOnAFifo(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	p := filepath.Join(e.root, GateEnv)
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := OwnerToken(e.h.fs); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO gave an owner token")
		}
	case <-time.After(20 * time.Second):
		openAndClose(p)
		<-done
		t.Fatal("reading the Gate environment file blocked on a FIFO")
	}
}

// A binary whose --version leaves a process holding its output open is
// refused once the output has been quiet for a moment after it exited: the
// installer neither waits for that process nor accepts the answer.
func TestIdentityRefusesABinaryThatLeavesItsOutputOpen(t *testing.T) {
	e := newEnv(t)
	before := e.digest()
	req := writeRelease(t, releaseOpt{version: v1.version, commit: v1.commit, mutate: func(kind string, ms []tarMember) []tarMember {
		if kind == "gate" {
			ms[1].data = []byte("#!/bin/sh\necho 'forge-gate " + v1.version + " " + v1.commit + "'\nsleep 8 &\n")
			ms[1].hdr.Size = int64(len(ms[1].data))
		}
		return ms
	}})
	err, _ := e.runBounded(t, req, func() {})
	ie := wantCode(t, err, ExitRefused)
	if ie.Stage != "stage" || !strings.Contains(ie.Msg, "forge-gate") {
		t.Fatalf("stage %s (%s)", ie.Stage, ie.Msg)
	}
	if e.digest() != before {
		t.Fatal("a refused install changed the machine")
	}
}
