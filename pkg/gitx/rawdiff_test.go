package gitx

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestParseRawFromGit(t *testing.T) {
	r := mustRunner(t)
	dir := mustRepo(t, r)
	ctx := context.Background()
	base, _ := r.Line(ctx, Cmd{Dir: dir, Args: []string{"rev-parse", "HEAD"}})
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("changed\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "new file\twith tab"), []byte("n\n"), 0o644)
	os.Symlink("a.txt", filepath.Join(dir, "link"))
	if _, err := r.Run(ctx, Cmd{Dir: dir, Args: []string{"add", "-A"}}); err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(ctx, Cmd{Dir: dir, Args: []string{"diff-index", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", base}})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ParseRaw(out)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	got := map[string]Change{}
	for _, c := range cs {
		got[c.Path] = c
	}
	if c := got["a.txt"]; c.Status != 'M' || c.NewMode != "100644" {
		t.Fatalf("a.txt: %+v", c)
	}
	if c := got["new file\twith tab"]; c.Status != 'A' {
		t.Fatalf("tab file: %+v", c)
	}
	if c := got["link"]; c.Status != 'A' || c.NewMode != ModeSymlink {
		t.Fatalf("link: %+v", c)
	}
	if !bytes.Equal(FormatRaw(cs), out) {
		t.Fatal("round trip differs")
	}
}

func TestParseRawRejects(t *testing.T) {
	z := "0000000000000000000000000000000000000000"
	for name, in := range map[string]string{
		"no path":      ":000000 100644 " + z + " " + z + " A\x00",
		"empty path":   ":000000 100644 " + z + " " + z + " A\x00\x00",
		"bad status":   ":000000 100644 " + z + " " + z + " R\x00p\x00",
		"bad mode":     ":00000x 100644 " + z + " " + z + " A\x00p\x00",
		"short sha":    ":000000 100644 " + z[:39] + " " + z + " A\x00p\x00",
		"upper sha":    ":000000 100644 " + "A" + z[1:] + " " + z + " A\x00p\x00",
		"no colon":     " 000000 100644 " + z + " " + z + " A\x00p\x00",
		"unterminated": ":000000 100644 " + z + " " + z + " A",
	} {
		if cs, err := ParseRaw([]byte(in)); err == nil || cs != nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseRaw(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/rawdiff-*.bin")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := ParseRaw(b)
		if err != nil {
			if cs != nil {
				t.Fatal("error with a result")
			}
			return
		}
		if !bytes.Equal(FormatRaw(cs), b) {
			t.Fatal("accepted input does not round-trip")
		}
	})
}
