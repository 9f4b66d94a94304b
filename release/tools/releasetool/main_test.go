package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func mustWrite(tb testing.TB, path, data string, mode os.FileMode) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

func mustRead(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// memberDir fills a fresh directory with the same logical content; only
// incidental metadata (creation order, file times, exact permission bits)
// differs between variants.
func memberDir(tb testing.TB, variant int) string {
	tb.Helper()
	dir := tb.TempDir()
	files := []struct {
		name, data string
		mode       os.FileMode
	}{
		{"forge-worker", "worker-binary", 0o755},
		{"VERSION", "v1.2.3 0123456789abcdef0123456789abcdef01234567\n", 0o644},
		{"forge-ref-plugin", "plugin-binary", 0o755},
	}
	if variant == 1 {
		files[0].mode, files[1].mode = 0o700, 0o600
		files[0], files[2] = files[2], files[0]
	}
	for i, f := range files {
		p := filepath.Join(dir, f.name)
		mustWrite(tb, p, f.data, f.mode)
		stamp := time.Unix(int64(1_000_000*(variant+1)+i), 0)
		if err := os.Chtimes(p, stamp, stamp); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func TestArchiveIsReproducibleAndNormalized(t *testing.T) {
	const mtime = 1_700_000_000
	out := t.TempDir()
	a, b := filepath.Join(out, "a.tar.gz"), filepath.Join(out, "b.tar.gz")
	if err := run([]string{"archive", "-dir", memberDir(t, 0), "-out", a, "-mtime", "1700000000"}); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"archive", "-dir", memberDir(t, 1), "-out", b, "-mtime", "1700000000"}); err != nil {
		t.Fatal(err)
	}
	first, second := mustRead(t, a), mustRead(t, b)
	if !bytes.Equal(first, second) {
		t.Fatal("archives of the same content differ")
	}
	// gzip header: magic, deflate, no flags, mtime 0, best-compression XFL, OS 255.
	wantHeader := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 255}
	if !bytes.Equal(first[:10], wantHeader) {
		t.Fatalf("gzip header = %x, want %x", first[:10], wantHeader)
	}
	zr, err := gzip.NewReader(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	type member struct {
		name string
		mode int64
		data string
	}
	var got []member
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" ||
			h.ModTime.Unix() != mtime || h.Format != tar.FormatUSTAR {
			t.Fatalf("member %q has unnormalized metadata: %+v", h.Name, h)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, member{h.Name, h.Mode, string(data)})
	}
	want := []member{
		{"VERSION", 0o644, "v1.2.3 0123456789abcdef0123456789abcdef01234567\n"},
		{"forge-ref-plugin", 0o755, "plugin-binary"},
		{"forge-worker", 0o755, "worker-binary"},
	}
	if len(got) != len(want) {
		t.Fatalf("members = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("member %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestArchiveNeverOverwrites(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.tar.gz")
	mustWrite(t, out, "keep", 0o644)
	err := run([]string{"archive", "-dir", memberDir(t, 0), "-out", out, "-mtime", "0"})
	if err == nil {
		t.Fatal("archive overwrote an existing file")
	}
	if got := string(mustRead(t, out)); got != "keep" {
		t.Fatalf("existing file changed to %q", got)
	}
}

func TestArchiveRejectsNonRegularMembersAndCleansUp(t *testing.T) {
	dir := memberDir(t, 0)
	if err := os.Symlink("forge-worker", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x.tar.gz")
	if err := run([]string{"archive", "-dir", dir, "-out", out, "-mtime", "0"}); err == nil {
		t.Fatal("symlink member accepted")
	}
	if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial archive left behind: %v", err)
	}
}

func TestRunRejectsBadUsage(t *testing.T) {
	for name, args := range map[string][]string{
		"none":            nil,
		"unknown":         {"frobnicate"},
		"archive-no-out":  {"archive", "-dir", "d", "-mtime", "0"},
		"archive-no-time": {"archive", "-dir", "d", "-out", "o"},
		"archive-extra":   {"archive", "-dir", "d", "-out", "o", "-mtime", "0", "more"},
		"publish-no-to":   {"publish", "-from", "a"},
	} {
		t.Run(name, func(t *testing.T) {
			var usage usageError
			if err := run(args); !errors.As(err, &usage) {
				t.Fatalf("err = %v, want usage error", err)
			}
		})
	}
}

func TestPublishNeverReplaces(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Fatalf("release publication is only supported on linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	setups := map[string]func(tb testing.TB, dst string){
		"file":      func(tb testing.TB, dst string) { mustWrite(tb, dst, "occupied", 0o644) },
		"empty-dir": func(tb testing.TB, dst string) { mustMkdir(tb, dst) },
		"full-dir": func(tb testing.TB, dst string) {
			mustMkdir(tb, dst)
			mustWrite(tb, filepath.Join(dst, "f"), "x", 0o644)
		},
		"dangling-symlink": func(tb testing.TB, dst string) { mustSymlink(tb, "nowhere", dst) },
		"dir-symlink":      func(tb testing.TB, dst string) { mustSymlink(tb, ".", dst) },
	}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			from, to := filepath.Join(root, "stage"), filepath.Join(root, "dist")
			mustMkdir(t, from)
			mustWrite(t, filepath.Join(from, "SHA256SUMS"), "sums", 0o644)
			setup(t, to)
			before := snapshot(t, to)
			if err := run([]string{"publish", "-from", from, "-to", to}); err == nil {
				t.Fatal("publish replaced an existing destination")
			}
			if after := snapshot(t, to); after != before {
				t.Fatalf("destination changed: %q -> %q", before, after)
			}
			if got := string(mustRead(t, filepath.Join(from, "SHA256SUMS"))); got != "sums" {
				t.Fatal("staging directory changed")
			}
		})
	}
	t.Run("absent", func(t *testing.T) {
		root := t.TempDir()
		from, to := filepath.Join(root, "stage"), filepath.Join(root, "dist")
		mustMkdir(t, from)
		mustWrite(t, filepath.Join(from, "SHA256SUMS"), "sums", 0o644)
		if err := run([]string{"publish", "-from", from, "-to", to}); err != nil {
			t.Fatal(err)
		}
		if got := string(mustRead(t, filepath.Join(to, "SHA256SUMS"))); got != "sums" {
			t.Fatal("published content differs")
		}
		if _, err := os.Lstat(from); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("staging directory still present after publication")
		}
	})
}

func mustMkdir(tb testing.TB, path string) {
	tb.Helper()
	if err := os.Mkdir(path, 0o755); err != nil {
		tb.Fatal(err)
	}
}

func mustSymlink(tb testing.TB, target, path string) {
	tb.Helper()
	if err := os.Symlink(target, path); err != nil {
		tb.Fatal(err)
	}
}

// snapshot describes what is at path without following a final symlink.
func snapshot(tb testing.TB, path string) string {
	tb.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		tb.Fatal(err)
	}
	switch {
	case info.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			tb.Fatal(err)
		}
		return "symlink:" + target
	case info.IsDir():
		entries, err := os.ReadDir(path)
		if err != nil {
			tb.Fatal(err)
		}
		s := "dir:"
		for _, e := range entries {
			s += e.Name() + ","
		}
		return s
	default:
		return "file:" + string(mustRead(tb, path))
	}
}
