package install

import (
	"context"
	"errors"
	"os"
	"path/filepath"
)

// release is a verified release: its identity and the member bytes of the
// three archives for this machine's architecture.
type release struct {
	version, commit string
	arch            string
	bins            map[string][]byte
}

// verifyRelease checks the release set in req.AssetDir without touching
// anything else: the trusted SHA256SUMS digest, the exact six-entry
// manifest, private staging copies hashed where they sit, and the strict
// tar allowlist. The staging directory is removed before it returns.
func verifyRelease(req Request, arch string) (*release, *Error) {
	fi, err := os.Lstat(req.AssetDir)
	if err != nil || !fi.IsDir() {
		return nil, refused("trust", "the asset directory is not a directory (symlinks are refused)")
	}
	sums, err := readAsset(req.AssetDir, "SHA256SUMS", maxSums)
	if err != nil {
		return nil, refused("trust", "SHA256SUMS "+err.Error())
	}
	if sha256hex(sums) != req.SumsSHA256 {
		return nil, refused("trust", "the SHA256SUMS digest does not match --sha256sums-sha256")
	}
	manifest, err := ParseSums(sums, req.Version)
	if err != nil {
		return nil, refused("manifest", err.Error())
	}
	if err := checkAssetEntries(req.AssetDir, req.Version); err != nil {
		return nil, refused("manifest", err.Error())
	}
	stage, err := os.MkdirTemp("", "forge-install-stage-")
	if err != nil {
		return nil, refused("staging", "cannot create a private staging directory")
	}
	defer os.RemoveAll(stage)
	rel := &release{version: req.Version, commit: req.Commit, arch: arch, bins: map[string][]byte{}}
	for _, kind := range []string{"cli", "gate", "worker"} {
		name := archiveName(kind, req.Version, arch)
		src, err := readAsset(req.AssetDir, name, maxArchive)
		if err != nil {
			return nil, refused("staging", "archive "+name+" "+err.Error())
		}
		staged := filepath.Join(stage, name)
		if err := os.WriteFile(staged, src, 0o600); err != nil {
			return nil, refused("staging", "cannot copy "+name+" into staging")
		}
		data, err := readAsset(stage, name, maxArchive)
		if err != nil {
			return nil, refused("staging", "cannot read the staged copy of "+name)
		}
		if sha256hex(data) != manifest[name] {
			return nil, refused("staging", "the staged copy of "+name+" does not match SHA256SUMS")
		}
		members, err := ReadArchive(data, kind, req.Version, req.Commit)
		if err != nil {
			return nil, refused("archive", name+": "+err.Error())
		}
		for _, m := range members[1:] {
			rel.bins[m.Name] = m.Data
		}
	}
	return rel, nil
}

// checkIdentity runs each binary under dir with --version and requires
// "<name> <version> <commit>".
func checkIdentity(ctx context.Context, f FS, dir, version, commit string) *Error {
	for _, b := range binaries {
		out, err := f.Run(ctx, dir+"/"+b.name, "--version")
		if err != nil {
			return refused("identity", b.name+" --version failed")
		}
		if string(out) != b.name+" "+version+" "+commit+"\n" {
			return refused("identity", b.name+" --version does not name the requested version and commit")
		}
	}
	return nil
}

// Error is a failed or refused run: the exit code, the stage and a
// value-free message.
type Error struct {
	Code  int
	Stage string
	Msg   string
}

func (e *Error) Error() string { return e.Stage + ": " + e.Msg }

func refused(stage, msg string) *Error { return &Error{Code: ExitRefused, Stage: stage, Msg: msg} }

var errLocked = errors.New("another forge install holds the installer lock")
