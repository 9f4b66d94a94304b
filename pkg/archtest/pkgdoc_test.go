package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasOneDocComment walks every Go package in the repository
// and requires exactly one file with a package doc comment.
func TestEveryPackageHasOneDocComment(t *testing.T) {
	dirs := map[string][]string{}
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "../.." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no packages found")
	}
	for dir, files := range dirs {
		var documented []string
		for _, f := range files {
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatalf("parse %s: %v", f, err)
			}
			if parsed.Doc != nil && strings.TrimSpace(parsed.Doc.Text()) != "" {
				documented = append(documented, filepath.Base(f))
			}
		}
		if len(documented) != 1 {
			t.Errorf("package %s has %d doc comments %v, want exactly 1", dir, len(documented), documented)
		}
	}
}
