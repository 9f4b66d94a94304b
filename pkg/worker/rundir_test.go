package worker

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRunDirsReuseOnlyUnchangedDirectories(t *testing.T) {
	root := t.TempDir()
	d := &runDirs{root: root, reuse: true}
	first, err := d.take()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(first.path); err != nil || fi.Mode().Perm() != 0o700 || filepath.Dir(first.path) != root {
		t.Fatalf("new directory %v, %v", fi, err)
	}
	d.give(first)
	again, _ := d.take()
	if again.path != first.path {
		t.Fatal("an untouched directory was not reused")
	}
	d.give(again)

	outside := t.TempDir()
	changes := map[string]func(string){
		"file left behind": func(p string) { os.WriteFile(filepath.Join(p, "x"), nil, 0o600) },
		"empty subdir":     func(p string) { os.Mkdir(filepath.Join(p, "x"), 0o700) },
		"mode changed":     func(p string) { os.Chmod(p, 0o755) },
		"removed":          func(p string) { os.Remove(p) },
		"replaced by a symlink": func(p string) {
			os.Remove(p)
			os.Symlink(outside, p)
		},
	}
	for name, change := range changes {
		r, err := d.take()
		if err != nil {
			t.Fatal(err)
		}
		change(r.path)
		d.give(r)
		if _, err := os.Lstat(r.path); !os.IsNotExist(err) {
			t.Fatalf("%s: directory kept (%v)", name, err)
		}
		if next, _ := d.take(); next.path == r.path {
			t.Fatalf("%s: directory handed out again", name)
		} else {
			d.give(next)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatal("removing a symlinked directory touched its target")
	}
	d.close()
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("%d entries left after close", len(ents))
	}
}

func TestRunDirsWithoutReuseRemoveEveryDirectory(t *testing.T) {
	root := t.TempDir()
	d := &runDirs{root: root}
	r, err := d.take()
	if err != nil {
		t.Fatal(err)
	}
	d.give(r)
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatal("directory kept without reuse")
	}
}
