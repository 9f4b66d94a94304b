// Package install implements `forge install`: a clean install, a
// validation-only re-run and a transactional upgrade of Agent Forge from an
// exact local Linux release set (the archives scripts/build-release.sh
// writes), and the layout and receipt forge doctor inspects.
//
// Everything that touches the machine goes through Host: the filesystem
// (every path is a host path, resolved under the host's root), the account
// manager, the service manager and the clock. SystemHost is the real
// machine (root "/", useradd, systemctl); tests substitute a temporary root
// and fake accounts and services to inject a failure at every step.
//
// A run verifies everything it can before it changes anything: the raw
// SHA256SUMS digest against the trusted one, the exact six-entry Linux
// manifest, private staging copies hashed where they sit, a strict tar
// allowlist and every binary's --version. It then stages the new files
// beside their destinations and publishes them with
// renameat2(RENAME_NOREPLACE). Every failure names its stage and is undone
// in reverse order; Result reports whether the previous state was restored
// (docs/install.md).
package install
