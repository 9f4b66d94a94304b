package install

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Exit codes (DECISIONS 13).
const (
	ExitOK         = 0
	ExitUsage      = 1
	ExitRefused    = 2
	ExitUnrestored = 3
)

// Request is one `forge install` invocation.
type Request struct {
	Version    string
	Commit     string
	AssetDir   string
	SumsSHA256 string
	EnableNow  bool
	RunAsRoot  bool
	Upgrade    bool
}

// Usage is the install synopsis.
const Usage = "install --version vX.Y.Z --commit <40-hex> --asset-dir <absolute-dir> --sha256sums-sha256 <64-hex> [--enable-now] [--run-as-root] [--upgrade]"

// ParseArgs parses the install flags: only the forms --name value and
// --name=value for the four value flags and a bare --name for the three
// switches, each at most once, all four value flags required and
// well-formed, no positional arguments, no "--" terminator and no
// single-dash spelling. Errors never echo a value.
func ParseArgs(args []string) (Request, error) {
	var r Request
	values := map[string]*string{
		"version": &r.Version, "commit": &r.Commit, "asset-dir": &r.AssetDir, "sha256sums-sha256": &r.SumsSHA256,
	}
	switches := map[string]*bool{"enable-now": &r.EnableNow, "run-as-root": &r.RunAsRoot, "upgrade": &r.Upgrade}
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, ok := strings.CutPrefix(a, "--")
		if !ok || name == "" || name[0] == '-' {
			return r, errors.New("unknown, repeated or malformed flag or a positional argument")
		}
		name, value, hasValue := strings.Cut(name, "=")
		if dst, ok := switches[name]; ok {
			if hasValue {
				return r, errors.New("--" + name + " takes no value")
			}
			if seen[name] {
				return r, errors.New("--" + name + " is repeated")
			}
			seen[name], *dst = true, true
			continue
		}
		dst, ok := values[name]
		if !ok {
			return r, errors.New("unknown, repeated or malformed flag or a positional argument")
		}
		if seen[name] {
			return r, errors.New("--" + name + " is repeated")
		}
		if !hasValue {
			if i+1 == len(args) {
				return r, errors.New("--" + name + " needs a value")
			}
			i++
			value = args[i]
		}
		seen[name], *dst = true, value
	}
	for _, name := range []string{"version", "commit", "asset-dir", "sha256sums-sha256"} {
		if !seen[name] {
			return r, errors.New("--" + name + " is required")
		}
	}
	if _, err := ParseSemver(r.Version); err != nil {
		return r, errors.New("--version must be vMAJOR.MINOR.PATCH")
	}
	if !ident.ValidSHA(r.Commit) {
		return r, errors.New("--commit must be 40 lowercase hex digits")
	}
	if !ident.ValidSHA256(r.SumsSHA256) {
		return r, errors.New("--sha256sums-sha256 must be 64 lowercase hex digits")
	}
	if !filepath.IsAbs(r.AssetDir) || filepath.Clean(r.AssetDir) != r.AssetDir || len(r.AssetDir) > 4096 ||
		strings.ContainsFunc(r.AssetDir, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return r, errors.New("--asset-dir must be a clean absolute path without control characters")
	}
	return r, nil
}
