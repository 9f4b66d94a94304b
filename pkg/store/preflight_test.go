//go:build unix

package store

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// snapshot records the type, mode, owner and contents of every object
// under root, so a test can prove a refused Open changed nothing.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fi.Mode().String() + "|" + string(rune('0'+st.Uid%10))
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			desc += "|" + string(b)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			desc += "|->" + target
		}
		out[p] = desc
		return nil
	})
	return out
}

func sameSnapshot(t *testing.T, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("objects changed: %d before, %d after", len(before), len(after))
	}
	for p, d := range before {
		if after[p] != d {
			t.Fatalf("%s changed: %q -> %q", p, d, after[p])
		}
	}
}

func mustMkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // defeat the umask for the fixture
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p string, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// expectInsecure opens dsn, requires an InsecureError for object, and
// checks that nothing under root changed and the error names no path.
func expectInsecure(t *testing.T, root, dsn, object string) {
	t.Helper()
	before := snapshot(t, root)
	s, err := Open(context.Background(), dsn)
	if err == nil {
		s.Close()
		t.Fatal("insecure location accepted")
	}
	var ie *InsecureError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInsecure) {
		t.Fatalf("error %v is not an InsecureError", err)
	}
	if ie.Object != object {
		t.Fatalf("error names %q, want %q (%v)", ie.Object, object, err)
	}
	if strings.Contains(err.Error(), root) || strings.Contains(err.Error(), "/") {
		t.Fatalf("error names a path: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, root))
}

func TestPreflightAcceptsPrivateLayout(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "state")
	mustMkdir(t, state, 0o700)
	db := filepath.Join(state, "forge.db")
	for i, dsn := range []string{db, "file://" + db + "?mode=rwc&cache=private"} {
		s := mustOpen(t, dsn)
		if _, err := s.Submit(context.Background(), textJob(gen(i), 1), t0); err != nil {
			t.Fatal(err)
		}
		// While open, SQLite's -wal and -shm exist with the database's mode.
		for _, suffix := range []string{"", "-wal", "-shm"} {
			fi, err := os.Lstat(db + suffix)
			if err != nil {
				t.Fatalf("%s: %v", suffix, err)
			}
			if fi.Mode() != 0o600 {
				t.Fatalf("%s mode %v, want 0600", suffix, fi.Mode())
			}
		}
		s.Close()
	}
	// A sticky world-writable ancestor (like /tmp) is trusted.
	sticky := filepath.Join(root, "sticky")
	mustMkdir(t, sticky, 0o777|os.ModeSticky)
	mustMkdir(t, filepath.Join(sticky, "state"), 0o700)
	mustOpen(t, filepath.Join(sticky, "state", "forge.db")).Close()
}

func TestPreflightRejects(t *testing.T) {
	t.Run("symlink ancestor", func(t *testing.T) {
		root := t.TempDir()
		mustMkdir(t, filepath.Join(root, "real"), 0o700)
		mustMkdir(t, filepath.Join(root, "real", "state"), 0o700)
		os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link"))
		expectInsecure(t, root, filepath.Join(root, "link", "state", "forge.db"), "ancestor directory")
	})
	t.Run("group-writable ancestor", func(t *testing.T) {
		root := t.TempDir()
		mustMkdir(t, filepath.Join(root, "gw"), 0o770)
		mustMkdir(t, filepath.Join(root, "gw", "state"), 0o700)
		expectInsecure(t, root, filepath.Join(root, "gw", "state", "forge.db"), "ancestor directory")
	})
	t.Run("world-writable ancestor", func(t *testing.T) {
		root := t.TempDir()
		mustMkdir(t, filepath.Join(root, "ww"), 0o757)
		mustMkdir(t, filepath.Join(root, "ww", "state"), 0o700)
		expectInsecure(t, root, filepath.Join(root, "ww", "state", "forge.db"), "ancestor directory")
	})
	t.Run("ancestor not a directory", func(t *testing.T) {
		root := t.TempDir()
		mustWrite(t, filepath.Join(root, "file"), "x", 0o600)
		expectInsecure(t, root, filepath.Join(root, "file", "state", "forge.db"), "ancestor directory")
	})
	t.Run("symlink parent", func(t *testing.T) {
		root := t.TempDir()
		mustMkdir(t, filepath.Join(root, "real"), 0o700)
		os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "state"))
		expectInsecure(t, root, filepath.Join(root, "state", "forge.db"), "database parent directory")
	})
	for _, mode := range []os.FileMode{0o750, 0o705, 0o770, 0o701, 0o710, 0o770 | os.ModeSticky} {
		t.Run("parent mode "+mode.String(), func(t *testing.T) {
			root := t.TempDir()
			mustMkdir(t, filepath.Join(root, "state"), mode)
			expectInsecure(t, root, filepath.Join(root, "state", "forge.db"), "database parent directory")
		})
	}
	t.Run("parent is a file", func(t *testing.T) {
		root := t.TempDir()
		mustWrite(t, filepath.Join(root, "state"), "x", 0o600)
		expectInsecure(t, root, filepath.Join(root, "state", "forge.db"), "database parent directory")
	})
	t.Run("two missing levels", func(t *testing.T) {
		root := t.TempDir()
		expectInsecure(t, root, filepath.Join(root, "a", "b", "forge.db"), "ancestor directory")
		if _, err := os.Lstat(filepath.Join(root, "a")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatal("a missing level was created")
		}
	})
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o400, 0o700, 0o660, 0o600 | os.ModeSetuid} {
		t.Run("database mode "+mode.String(), func(t *testing.T) {
			root := t.TempDir()
			state := filepath.Join(root, "state")
			mustMkdir(t, state, 0o700)
			mustWrite(t, filepath.Join(state, "forge.db"), "", 0o600)
			if err := os.Chmod(filepath.Join(state, "forge.db"), mode); err != nil {
				t.Fatal(err)
			}
			expectInsecure(t, root, filepath.Join(state, "forge.db"), "database")
		})
	}
	t.Run("database symlink", func(t *testing.T) {
		root := t.TempDir()
		state := filepath.Join(root, "state")
		mustMkdir(t, state, 0o700)
		mustWrite(t, filepath.Join(state, "target.db"), "", 0o600)
		os.Symlink("target.db", filepath.Join(state, "forge.db"))
		expectInsecure(t, root, filepath.Join(state, "forge.db"), "database")
	})
	t.Run("dangling database symlink", func(t *testing.T) {
		root := t.TempDir()
		state := filepath.Join(root, "state")
		mustMkdir(t, state, 0o700)
		os.Symlink(filepath.Join(root, "elsewhere.db"), filepath.Join(state, "forge.db"))
		expectInsecure(t, root, filepath.Join(state, "forge.db"), "database")
		if _, err := os.Lstat(filepath.Join(root, "elsewhere.db")); err == nil {
			t.Fatal("symlink target was created")
		}
	})
	t.Run("database is a directory", func(t *testing.T) {
		root := t.TempDir()
		state := filepath.Join(root, "state")
		mustMkdir(t, state, 0o700)
		mustMkdir(t, filepath.Join(state, "forge.db"), 0o700)
		expectInsecure(t, root, filepath.Join(state, "forge.db"), "database")
	})
	t.Run("database is a fifo", func(t *testing.T) {
		root := t.TempDir()
		state := filepath.Join(root, "state")
		mustMkdir(t, state, 0o700)
		if err := syscall.Mkfifo(filepath.Join(state, "forge.db"), 0o600); err != nil {
			t.Fatal(err)
		}
		expectInsecure(t, root, filepath.Join(state, "forge.db"), "database")
	})
	for _, suffix := range companions {
		t.Run(suffix+" mode", func(t *testing.T) {
			root := t.TempDir()
			state := filepath.Join(root, "state")
			mustMkdir(t, state, 0o700)
			mustWrite(t, filepath.Join(state, "forge.db"), "", 0o600)
			mustWrite(t, filepath.Join(state, "forge.db"+suffix), "", 0o644)
			expectInsecure(t, root, filepath.Join(state, "forge.db"), suffix+" file")
		})
		t.Run(suffix+" symlink", func(t *testing.T) {
			root := t.TempDir()
			state := filepath.Join(root, "state")
			mustMkdir(t, state, 0o700)
			mustWrite(t, filepath.Join(state, "forge.db"), "", 0o600)
			mustWrite(t, filepath.Join(root, "other"), "", 0o600)
			os.Symlink(filepath.Join(root, "other"), filepath.Join(state, "forge.db"+suffix))
			expectInsecure(t, root, filepath.Join(state, "forge.db"), suffix+" file")
		})
		t.Run(suffix+" missing database", func(t *testing.T) {
			// A stray insecure companion fails Open even when the database
			// itself is new; the database created by O_EXCL stays (0600).
			root := t.TempDir()
			state := filepath.Join(root, "state")
			mustMkdir(t, state, 0o700)
			mustWrite(t, filepath.Join(state, "forge.db"+suffix), "", 0o640)
			_, err := Open(context.Background(), filepath.Join(state, "forge.db"))
			if !errors.Is(err, ErrInsecure) {
				t.Fatalf("got %v", err)
			}
			fi, err := os.Lstat(filepath.Join(state, "forge.db"+suffix))
			if err != nil || fi.Mode() != 0o640 {
				t.Fatal("insecure companion was changed")
			}
		})
	}
}

func TestPreflightCreatesOnlyImmediateParent(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "base")
	mustMkdir(t, base, 0o755)
	db := filepath.Join(base, "state", "forge.db")
	mustOpen(t, db).Close()
	fi, err := os.Lstat(filepath.Join(base, "state"))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("parent: %v %v", fi.Mode(), err)
	}
	fi, err = os.Lstat(db)
	if err != nil || fi.Mode() != 0o600 {
		t.Fatalf("database: %v %v", fi.Mode(), err)
	}
	// Reopening the created layout works and keeps it.
	mustOpen(t, db).Close()
}

func TestCreateDatabaseIsExclusive(t *testing.T) {
	dir := privateDir(t)
	p := filepath.Join(dir, "forge.db")
	euid := uint32(os.Geteuid())
	if err := createDatabase(p, euid); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode() != 0o600 {
		t.Fatalf("created %v %v", fi.Mode(), err)
	}
	mustWrite(t, p, "keep", 0o600)
	if err := createDatabase(p, euid); !errors.Is(err, ErrInsecure) {
		t.Fatalf("second create: %v", err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, []byte("keep")) {
		t.Fatal("existing file was replaced")
	}
	// A symlink in the final position is never followed.
	os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "link.db"))
	if err := createDatabase(filepath.Join(dir, "link.db"), euid); err == nil {
		t.Fatal("created through a symlink")
	}
	if _, err := os.Lstat(filepath.Join(dir, "target")); err == nil {
		t.Fatal("symlink target was created")
	}
}

// TestOwnershipRules checks the owner rules on real objects. Without root
// no foreign-owned file can be made, so the checks run against a different
// expected UID; as root the objects are also chowned and Open refused.
func TestOwnershipRules(t *testing.T) {
	dir := privateDir(t)
	f := filepath.Join(dir, "forge.db")
	mustWrite(t, f, "", 0o600)
	euid := uint32(os.Geteuid())
	other := euid + 1000
	fi, _ := os.Lstat(f)
	if err := checkFile("database", fi, euid); err != nil {
		t.Fatalf("own file rejected: %v", err)
	}
	if err := checkFile("database", fi, other); !errors.Is(err, ErrInsecure) {
		t.Fatalf("foreign file accepted: %v", err)
	}
	di, _ := os.Lstat(dir)
	if err := checkParent(di, other); !errors.Is(err, ErrInsecure) {
		t.Fatalf("foreign parent accepted: %v", err)
	}
	if euid != 0 {
		if err := checkAncestor(dir, other); !errors.Is(err, ErrInsecure) {
			t.Fatalf("foreign ancestor accepted: %v", err)
		}
	}
	if err := checkAncestor("/", other); err != nil {
		t.Fatalf("root-owned ancestor rejected: %v", err)
	}
	if euid != 0 {
		return
	}
	const nobody = 65534
	t.Run("foreign database", func(t *testing.T) {
		root := t.TempDir()
		state := filepath.Join(root, "state")
		mustMkdir(t, state, 0o700)
		mustWrite(t, filepath.Join(state, "forge.db"), "", 0o600)
		os.Lchown(filepath.Join(state, "forge.db"), nobody, nobody)
		expectInsecure(t, root, filepath.Join(state, "forge.db"), "database")
	})
	t.Run("foreign wal", func(t *testing.T) {
		root := t.TempDir()
		state := filepath.Join(root, "state")
		mustMkdir(t, state, 0o700)
		mustWrite(t, filepath.Join(state, "forge.db"), "", 0o600)
		mustWrite(t, filepath.Join(state, "forge.db-wal"), "", 0o600)
		os.Lchown(filepath.Join(state, "forge.db-wal"), nobody, nobody)
		expectInsecure(t, root, filepath.Join(state, "forge.db"), "-wal file")
	})
	t.Run("foreign parent", func(t *testing.T) {
		root := t.TempDir()
		state := filepath.Join(root, "state")
		mustMkdir(t, state, 0o700)
		os.Lchown(state, nobody, nobody)
		expectInsecure(t, root, filepath.Join(state, "forge.db"), "database parent directory")
	})
	t.Run("foreign ancestor", func(t *testing.T) {
		root := t.TempDir()
		mustMkdir(t, filepath.Join(root, "anc"), 0o755)
		mustMkdir(t, filepath.Join(root, "anc", "state"), 0o700)
		os.Lchown(filepath.Join(root, "anc"), nobody, nobody)
		expectInsecure(t, root, filepath.Join(root, "anc", "state", "forge.db"), "ancestor directory")
	})
}

func TestSecondOpenRefused(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	for _, dsn := range []string{path, "file://" + path, filepath.Join(filepath.Dir(path), "other.db")} {
		_, err := Open(context.Background(), dsn)
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("second open: %v", err)
		}
		if strings.Contains(err.Error(), "/") {
			t.Fatalf("error names a path: %v", err)
		}
	}
	// The first store is unaffected by the refused opens.
	mustSubmit(t, s, textJob("j2", 1), t0)
	if _, err := s.Job(context.Background(), "j1"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := mustOpen(t, path)
	if _, err := s2.Job(context.Background(), "j2"); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
}
