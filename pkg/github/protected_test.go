//go:build unix

package github

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// ReadProtectedFile is the one home of the owner-only file rule that the
// App key (LoadPrivateKeyFile) and forge-github's config both follow.
func TestReadProtectedFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("1234"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadProtectedFile(good, 4); err != nil || string(b) != "1234" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := ReadProtectedFile(good, 3); !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if _, err := ReadProtectedFile(filepath.Join(dir, "absent"), 4); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("absent: %v", err)
	}
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.WriteFile(open, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(open), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{loose, link, open, "relative", dir + "/./good", dir} {
		if _, err := ReadProtectedFile(p, 4); !errors.Is(err, ErrFileUnsafe) {
			t.Errorf("%s: %v, want ErrFileUnsafe", filepath.Base(p), err)
		}
	}
}
