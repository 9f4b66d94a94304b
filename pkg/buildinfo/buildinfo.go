// Package buildinfo carries the version and commit stamped into every
// binary by the release builder (-ldflags -X), and formats the --version
// line all binaries print.
package buildinfo

// Set at link time by scripts/build-release.sh; development builds keep the
// defaults. These are the only package-level variables the project has, and
// nothing writes them at run time.
var (
	version = "v0.0.0-dev"
	commit  = "unknown"
)

// Version returns the stamped semantic version.
func Version() string { return version }

// Commit returns the stamped full commit SHA.
func Commit() string { return commit }

// Line is what `<binary> --version` prints: name, version and commit.
func Line(binary string) string {
	return binary + " " + version + " " + commit
}
