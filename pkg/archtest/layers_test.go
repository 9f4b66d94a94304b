package archtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tiers of the internal import direction: a package may import only
// packages of a strictly lower rank, so imports point from the binaries
// (cmd) through the applications (gate, worker, cli) and the domain
// packages (store, wire, plugin, ...) down to the leaves (ident,
// strictjson, policy, ...). Within a tier the offsets order the packages
// that build on each other. Test files are not checked: a test may
// exercise its package together with any other.
const (
	tierLeaf   = 0
	tierDomain = 10
	tierApp    = 20
	tierMain   = 30
)

// ranks maps an import path below the module (longest prefix wins) to its
// rank. A new package must be added here; its rank says what it may import
// and who may import it.
var ranks = map[string]int{
	"pkg/ident":       tierLeaf,
	"pkg/strictjson":  tierLeaf,
	"pkg/buildinfo":   tierLeaf,
	"pkg/daemonargs":  tierLeaf,
	"pkg/sandbox":     tierLeaf,
	"pkg/supervise":   tierLeaf + 1, // runs children in pkg/sandbox's policies
	"pkg/testseed":    tierLeaf,
	"pkg/seccomptest": tierLeaf,
	"pkg/policy":      tierLeaf + 1,
	"pkg/configfile":  tierLeaf + 1,
	"pkg/secretscan":  tierLeaf,
	"pkg/metrics":     tierLeaf,   // the Prometheus text format
	"pkg/egress":      tierLeaf,   // the attempts' CONNECT proxy: imports nothing internal
	"pkg/gateway":     tierDomain, // the model gateway: imports leaves only

	"pkg/plugin":             tierDomain,
	"pkg/evidence":           tierDomain,
	"pkg/gitx":               tierDomain,
	"pkg/store":              tierDomain,
	"pkg/activity":           tierDomain + 1,
	"pkg/plugin/host":        tierDomain + 1,
	"pkg/plugin/serve":       tierDomain + 1,
	"pkg/agent":              tierDomain + 1,
	"pkg/codex":              tierDomain + 2,
	"pkg/claude":             tierDomain + 2,
	"pkg/gemini":             tierDomain + 2,
	"pkg/agentplugin":        tierDomain + 2,
	"pkg/source":             tierDomain + 1,
	"pkg/wire":               tierDomain + 2,
	"pkg/plugin/conformance": tierDomain + 2,
	"pkg/debugview":          tierDomain + 2,
	"pkg/github":             tierDomain + 3,
	"pkg/delivery":           tierDomain + 5, // applies intake's trust rule to reviewers
	"pkg/intake":             tierDomain + 4, // builds on wire's task rules and pkg/github
	"pkg/install":            tierDomain + 5,
	"pkg/doctor":             tierDomain + 6, // reads the install layout and receipt

	"pkg/gate":    tierApp,
	"pkg/worker":  tierApp,
	"pkg/cli":     tierApp,
	"pkg/publish": tierApp,
	// Test support: imported only by tests, free to build on anything below.
	"pkg/acceptance":            tierApp,
	"pkg/agenttest":             tierApp,
	"pkg/cgrouptest":            tierApp,
	"pkg/archtest":              tierApp,
	"pkg/githubfake":            tierApp,
	"pkg/providerfake":          tierApp,
	"pkg/debugview/browsertest": tierApp,
	"pkg/debugview/readertest":  tierApp,

	"cmd":           tierMain,
	"release/tools": tierMain,
	"testdata":      tierMain, // test programs, one directory each
}

// rankOf returns the rank of an internal import path by its longest
// matching prefix in ranks.
func rankOf(path string) (int, bool) {
	rel := strings.TrimPrefix(path, module+"/")
	best, rank := -1, 0
	for prefix, r := range ranks {
		if (rel == prefix || strings.HasPrefix(rel, prefix+"/")) && len(prefix) > best {
			best, rank = len(prefix), r
		}
	}
	return rank, best >= 0
}

// layerViolations lists every internal package without a rank and every
// internal import that does not point to a strictly lower rank.
func layerViolations(pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module+"/") {
			continue
		}
		from, ok := rankOf(p.ImportPath)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s has no rank: add it to ranks in pkg/archtest/layers_test.go", p.ImportPath))
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to, ok := rankOf(imp)
			if !ok {
				bad = append(bad, fmt.Sprintf("%s imports %s, which has no rank", p.ImportPath, imp))
			} else if to >= from {
				bad = append(bad, fmt.Sprintf("%s (rank %d) imports %s (rank %d): imports must point to a lower rank", p.ImportPath, from, imp, to))
			}
		}
	}
	return bad
}

func TestImportsPointDown(t *testing.T) {
	pkgs := goList(t, append([]string{"./..."}, testPrograms(t)...)...)
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, v := range layerViolations(pkgs) {
		t.Error(v)
	}
}

// testPrograms lists the Go test programs under the top-level testdata
// directory, which ./... does not match.
func testPrograms(t *testing.T) []string {
	t.Helper()
	mains, err := filepath.Glob("../../testdata/*/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no test programs under testdata (%v)", err)
	}
	var dirs []string
	for _, m := range mains {
		dirs = append(dirs, "./testdata/"+filepath.Base(filepath.Dir(m)))
	}
	return dirs
}

// TestWrongWayImportFails plants packages in a temporary copy of the module
// path: a leaf importing a domain package, a domain package importing an
// application, and a package nobody ranked. Each must be reported, and the
// imports that point down must not be.
func TestWrongWayImportFails(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                 "module " + module + "\n\ngo 1.24\n",
		"pkg/ident/ident.go":     "package ident\n\nimport _ \"" + module + "/pkg/store\"\n",
		"pkg/store/store.go":     "package store\n\nimport _ \"" + module + "/pkg/gate\"\n",
		"pkg/gate/gate.go":       "package gate\n\nimport _ \"" + module + "/pkg/wire\"\n",
		"pkg/wire/wire.go":       "package wire\n\nimport _ \"" + module + "/pkg/strictjson\"\n",
		"pkg/strictjson/s.go":    "package strictjson\n",
		"pkg/grabbag/grabbag.go": "package grabbag\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	violations := layerViolations(goListIn(t, dir, "./..."))
	got := strings.Join(violations, "\n")
	for _, want := range []string{
		"pkg/ident (rank 0) imports " + module + "/pkg/store (rank 10)",
		"pkg/store (rank 10) imports " + module + "/pkg/gate (rank 20)",
		"pkg/grabbag has no rank",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("violations do not report %q:\n%s", want, got)
		}
	}
	if len(violations) != 3 {
		t.Errorf("want exactly the 3 planted violations, got %d:\n%s", len(violations), got)
	}
}
