package install

import (
	"errors"
	"flag"
	"io"
	"path/filepath"
	"strconv"

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

// ParseArgs parses the install flags: each at most once, all four value
// flags required and well-formed, no positional arguments. Errors never
// echo a value.
func ParseArgs(args []string) (Request, error) {
	var r Request
	fs := flag.NewFlagSet("forge install", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	seen := map[string]bool{}
	once := func(name string, set func(string) error) {
		fs.Func(name, "", func(v string) error {
			if seen[name] {
				return errors.New("repeated")
			}
			seen[name] = true
			return set(v)
		})
	}
	str := func(dst *string) func(string) error { return func(v string) error { *dst = v; return nil } }
	boolean := func(name string, dst *bool) {
		fs.BoolFunc(name, "", func(v string) error {
			if seen[name] {
				return errors.New("repeated")
			}
			seen[name] = true
			b, err := strconv.ParseBool(v)
			if err != nil || !b {
				return errors.New("takes no value")
			}
			*dst = true
			return nil
		})
	}
	once("version", str(&r.Version))
	once("commit", str(&r.Commit))
	once("asset-dir", str(&r.AssetDir))
	once("sha256sums-sha256", str(&r.SumsSHA256))
	boolean("enable-now", &r.EnableNow)
	boolean("run-as-root", &r.RunAsRoot)
	boolean("upgrade", &r.Upgrade)
	if err := fs.Parse(args); err != nil {
		return r, errors.New("unknown, repeated or malformed flag")
	}
	if fs.NArg() != 0 {
		return r, errors.New("install takes no positional arguments")
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
	if !filepath.IsAbs(r.AssetDir) || filepath.Clean(r.AssetDir) != r.AssetDir || len(r.AssetDir) > 4096 {
		return r, errors.New("--asset-dir must be a clean absolute path")
	}
	return r, nil
}
