package install

import (
	"errors"
	"io/fs"
	"sort"
)

// maxBinary bounds an installed file read for hashing.
const maxBinary = 512 << 20

// CheckRecord compares one receipt record with the path on disk and
// returns a value-free problem ("" when it matches): the object type (no
// symlinks), owner, exact mode and, for immutable files, the digest.
func CheckRecord(f FS, r FileRecord) string {
	fi, err := f.Lstat(r.Path)
	if err != nil {
		return r.Path + " is missing"
	}
	wantDir := r.Kind == KindDir || r.Kind == KindConfigDir
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return r.Path + " is a symlink"
	case wantDir && !fi.IsDir(), !wantDir && !fi.Mode().IsRegular():
		return r.Path + " has the wrong object type"
	}
	if uid, gid := owner(fi); uid != r.UID || gid != r.GID {
		return r.Path + " has the wrong owner"
	}
	if fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != r.Perm() {
		return r.Path + " has the wrong mode"
	}
	if r.Kind == KindFile {
		b, err := f.ReadFile(r.Path, maxBinary)
		if err != nil {
			return r.Path + " cannot be read"
		}
		if sha256hex(b) != r.SHA256 {
			return r.Path + " does not match its receipt digest"
		}
	}
	return ""
}

// CheckImmutable checks every immutable record and that the prefix holds
// nothing but the receipt's files.
func CheckImmutable(f FS, r *Receipt) []string {
	var problems []string
	for _, fr := range r.Files {
		if fr.Immutable() {
			if p := CheckRecord(f, fr); p != "" {
				problems = append(problems, p)
			}
		}
	}
	if p := checkReceiptFile(f); p != "" {
		problems = append(problems, p)
	}
	want := map[string][]string{Prefix: {"bin", "receipt.json"}}
	for _, b := range binaries {
		want[BinDir] = append(want[BinDir], b.name)
	}
	for _, dir := range []string{Prefix, BinDir} {
		entries, err := f.ReadDir(dir)
		if err != nil {
			continue // reported by CheckRecord
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		if !equalStrings(names, want[dir]) {
			problems = append(problems, dir+" holds unexpected entries")
		}
	}
	return problems
}

// CheckMutable checks the config and secret paths' types, owners and modes.
func CheckMutable(f FS, r *Receipt) []string {
	var problems []string
	for _, fr := range r.Files {
		if !fr.Immutable() {
			if p := CheckRecord(f, fr); p != "" {
				problems = append(problems, p)
			}
		}
	}
	return problems
}

// checkReceiptFile requires the receipt to be a root-owned 0644 regular file.
func checkReceiptFile(f FS) string {
	fi, err := f.Lstat(ReceiptPath)
	switch {
	case err != nil:
		return ReceiptPath + " is missing"
	case !fi.Mode().IsRegular():
		return ReceiptPath + " is not a regular file"
	case !ownedBy(fi, 0, 0):
		return ReceiptPath + " has the wrong owner"
	case fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0o644:
		return ReceiptPath + " has the wrong mode"
	}
	return ""
}

// ReadReceipt reads and strictly decodes the installed receipt.
func ReadReceipt(f FS) (*Receipt, error) {
	b, err := f.ReadFile(ReceiptPath, maxReceipt)
	if err != nil {
		return nil, err
	}
	return DecodeReceipt(b)
}

// CheckAncestors requires every trusted ancestor to be a root-owned
// directory (not a symlink) that neither group nor others can write.
func CheckAncestors(f FS) []string {
	var problems []string
	for _, d := range TrustedAncestors {
		fi, err := f.Lstat(d)
		switch {
		case err != nil:
			problems = append(problems, d+" is missing")
		case !fi.IsDir():
			problems = append(problems, d+" is not a directory")
		case !ownedBy(fi, 0, -1):
			problems = append(problems, d+" is not owned by root")
		case fi.Mode().Perm()&0o022 != 0:
			problems = append(problems, d+" is writable by group or others")
		}
	}
	return problems
}

// CheckStateRoot checks /var/lib/agent-forge like every trusted ancestor
// (a root-owned directory, not a symlink, that group and others cannot
// write): the Gate refuses to start under anything else. Absent is fine
// (nothing started yet).
func CheckStateRoot(f FS) []string {
	fi, err := f.Lstat(StateRoot)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return []string{StateRoot + " cannot be inspected"}
	case fi.Mode()&fs.ModeSymlink != 0:
		return []string{StateRoot + " is a symlink"}
	case !fi.IsDir():
		return []string{StateRoot + " is not a directory"}
	case !ownedBy(fi, 0, -1):
		return []string{StateRoot + " is not owned by root"}
	case fi.Mode().Perm()&0o022 != 0:
		return []string{StateRoot + " is writable by group or others"}
	}
	return nil
}

// ReadableBy reports whether an account (uid, gid, no other groups) can
// read fi by its owner and mode bits (root is not an account here).
func ReadableBy(fi fs.FileInfo, id Identity) bool {
	uid, gid := owner(fi)
	perm := fi.Mode().Perm()
	// A directory is reachable when it can be listed or traversed.
	mask := fs.FileMode(0o4)
	if fi.IsDir() {
		mask = 0o5
	}
	switch {
	case uid == id.UID:
		return perm&(mask<<6) != 0
	case gid == id.GID:
		return perm&(mask<<3) != 0
	}
	return perm&mask != 0
}

// CheckSeparation requires the Gate's state, configuration and secrets to
// be unreadable to the Worker account and the Worker's to the Gate's
// (DECISIONS 14). Paths that do not exist (a never-started installation's
// state) are not reported here.
func CheckSeparation(f FS, r *Receipt) []string {
	if r.RunAsRoot {
		return []string{"both services run as root (--run-as-root): the Worker can read the Gate's state and secrets"}
	}
	if r.Gate.UID == r.Worker.UID || r.Gate.GID == r.Worker.GID {
		return []string{"the Gate and Worker accounts share a uid or gid"}
	}
	var problems []string
	check := func(p string, other Identity, who string) {
		fi, err := f.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			return // absent, or a symlink that mutable-paths reports
		}
		if ReadableBy(fi, other) {
			problems = append(problems, p+" is readable by the "+who+" account")
		}
	}
	for _, p := range []string{GateStateDir, Database, Database + "-wal", Database + "-shm", GateEnv, GateConfig} {
		check(p, r.Worker, WorkerAccount)
	}
	for _, p := range []string{WorkerState, WorkerEnv, WorkerConfig} {
		check(p, r.Gate, GateAccount)
	}
	return problems
}

// CheckServiceAccounts requires both service accounts to exist with the
// receipt's ids, each a system account with its own memberless primary
// group.
func CheckServiceAccounts(a Accounts, r *Receipt) []string {
	if r.RunAsRoot {
		return nil
	}
	var problems []string
	for i, name := range ServiceAccounts {
		want := []Identity{r.Gate, r.Worker}[i]
		info, found, err := a.Lookup(name)
		switch {
		case err != nil:
			problems = append(problems, "the "+name+" account cannot be looked up")
		case !found:
			problems = append(problems, "the "+name+" account is missing")
		case (Identity{info.UID, info.GID}) != want:
			problems = append(problems, "the "+name+" account does not have the receipt's uid and gid")
		default:
			if err := checkAccount(name, info); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	return problems
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
