package worker

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// sparse makes p a 1 TiB sparse file.
func sparse(t *testing.T, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// Every read of an agent-writable path is bounded and follows nothing: a
// huge sparse file, a symbolic link out, a FIFO and a directory in a
// file's place are refused (or hashed as what they are), never read
// through, never blocked on.
func TestAttemptFilesBoundedNoFollow(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "token"), []byte("secret\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ok\n"), 0o644)
	sparse(t, filepath.Join(dir, "big"))
	os.Symlink(filepath.Join(outside, "token"), filepath.Join(dir, "link"))
	os.Symlink(outside, filepath.Join(dir, "linkdir"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)

	if b, err := readAttemptFile(filepath.Join(dir, "HEAD"), 16); err != nil || string(b) != "ok\n" {
		t.Fatalf("HEAD: %q %v", b, err)
	}
	for name, want := range map[string]error{
		"big": errTooLarge, "link": errSymlink, "fifo": errNotRegular, "sub": errNotRegular,
		"absent": fs.ErrNotExist, "linkdir/token": errSymlink,
	} {
		if b, err := readAttemptFile(filepath.Join(dir, name), maxGitFile); !errors.Is(err, want) || b != nil {
			t.Errorf("%s: %q %v, want %v", name, b, err, want)
		}
	}
	d, err := openDirNoFollow(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if b, err := readBeneath(d, "linkdir/token", maxGitFile); !errors.Is(err, errNotDirectory) || b != nil {
		t.Errorf("read through a symlinked directory: %q %v", b, err)
	}

	// Digests hash what each entry is, without reading it: a change of
	// type or size shows, nothing blocks, nothing is followed.
	before, err := digestFiles(dir, "HEAD", "big", "link", "fifo", "sub", "absent", "linkdir/token")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "token"), []byte("changed\n"), 0o600)
	if again, err := digestFiles(dir, "HEAD", "big", "link", "fifo", "sub", "absent", "linkdir/token"); err != nil || again != before {
		t.Fatalf("a digest read through a link: %v", err)
	}
	if err := os.Truncate(filepath.Join(dir, "big"), 1<<41); err != nil {
		t.Fatal(err)
	}
	if again, _ := digestFiles(dir, "big"); again == before {
		t.Fatal("an oversized file's size does not show")
	}
	if _, err := digestDir(dir); err != nil {
		t.Fatal(err)
	}
	if d, err := digestDir(filepath.Join(dir, "linkdir")); err != nil || d != errSymlink.Error() {
		t.Fatalf("a symlinked directory was read: %q %v", d, err)
	}
}

// A plugin that makes its HEAD or a hook a 1 TiB sparse file fails its
// attempt (workspace_violation), cleanly: the Worker reads neither.
func TestCodingSparseMetadata(t *testing.T) {
	plugin := buildEditPlugin(t)
	for _, c := range []struct {
		name, instruction string
		reason            evidence.Reason
	}{
		{"HEAD", "write a.txt a\nsparse admin HEAD", evidence.ReasonHeadMoved},
		{"hook", "write a.txt a\nsparse common hooks/post-checkout", evidence.ReasonConfigChanged},
		{"config", "write a.txt a\nsparse common config", evidence.ReasonConfigChanged},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newCodingFixture(t, plugin)
			r := f.run(f.lease(wire.CodingTask{Instruction: c.instruction}, nil))
			f.expectFailure(r, wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, c.reason)
		})
	}
}
