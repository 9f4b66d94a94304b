package archtest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/0k-lab/agent-forge"

// allowedImporters lists, for each third-party package the project may
// import directly, the package prefixes allowed to do so.
var allowedImporters = map[string][]string{
	"modernc.org/sqlite":         {module + "/pkg/store"},
	"golang.org/x/net/websocket": {module + "/pkg/wire", module + "/pkg/gate", module + "/pkg/worker", module + "/pkg/debugview/browsertest"},
}

// allowedModules are the only modules that may appear anywhere in the
// dependency graph besides the standard library and this module; the ones
// after the first two are transitive needs of modernc.org/sqlite.
var allowedModules = []string{
	"modernc.org/sqlite", "golang.org/x/net",
	"modernc.org/libc", "modernc.org/mathutil", "modernc.org/memory",
	"github.com/dustin/go-humanize", "github.com/google/uuid", "github.com/mattn/go-isatty",
	"github.com/ncruces/go-strftime", "github.com/remyoudompheng/bigfft",
	"golang.org/x/sys",
}

type listedPackage struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Module     *struct{ Path string }
}

func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	return goListIn(t, "../..", args...)
}

// goListIn runs go list in the module rooted at dir.
func goListIn(t *testing.T, dir string, args ...string) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Standard,Imports,Module"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestDependencyGraphIsAllowed(t *testing.T) {
	for _, p := range goList(t, "-deps", "-test", "./...") {
		if p.Standard || p.Module == nil || p.Module.Path == module {
			continue
		}
		if !hasPrefixAny(p.Module.Path, allowedModules) {
			t.Errorf("package %s comes from module %s outside the allowlist", p.ImportPath, p.Module.Path)
		}
	}
}

func TestDirectImportsAreAllowed(t *testing.T) {
	for _, p := range goList(t, "./...") {
		for _, imp := range p.Imports {
			if isStandard(imp) || strings.HasPrefix(imp, module+"/") {
				continue
			}
			importers, ok := allowedImporters[imp]
			if !ok {
				t.Errorf("%s imports %s: only the standard library, modernc.org/sqlite and golang.org/x/net/websocket are allowed", p.ImportPath, imp)
				continue
			}
			if !hasPrefixAny(p.ImportPath, importers) {
				t.Errorf("%s imports %s: only %v may", p.ImportPath, imp, importers)
			}
		}
	}
}

func isStandard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func hasPrefixAny(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}
