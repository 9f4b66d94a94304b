package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// ReceiptFormat is the receipt layout version. Format 1 was the
// single-account installation (both services as agent-forge), which this
// release refuses to upgrade (docs/install.md).
const ReceiptFormat = 2

// ErrOneAccount is a format-1 receipt: an installation whose Gate and
// Worker share one account.
var ErrOneAccount = errors.New("the installation runs the Gate and the Worker as one account (receipt format 1); this release runs them as two accounts and does not migrate an installation: follow \"Upgrading a one-account installation\" in docs/install.md")

// maxReceipt bounds the receipt file.
const maxReceipt = 64 << 10

// Receipt records one installation: the release, the service identity and
// every installed path with its owner and mode, and the digest of every
// immutable file. It is root-owned 0644 at ReceiptPath.
type Receipt struct {
	Format        int          `json:"format"`
	Version       string       `json:"version"`
	Commit        string       `json:"commit"`
	SchemaVersion int          `json:"schema_version"`
	Arch          string       `json:"arch"`
	RunAsRoot     bool         `json:"run_as_root"`
	Gate          Identity     `json:"gate"`
	Worker        Identity     `json:"worker"`
	Listen        string       `json:"listen"`
	Files         []FileRecord `json:"files"`
}

// Identity is a service's uid and gid (0 and 0 with --run-as-root).
type Identity struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

func (i Identity) valid() bool {
	return i.UID >= 0 && i.GID >= 0 && i.UID <= 1<<31-2 && i.GID <= 1<<31-2
}

func (i Identity) root() bool { return i.UID == 0 && i.GID == 0 }

// File kinds. Immutable: KindDir, KindFile (with digest). Mutable (owner
// and mode only; the content is the operator's): KindConfigDir,
// KindConfig, KindSecret.
const (
	KindDir       = "dir"
	KindFile      = "file"
	KindConfigDir = "config-dir"
	KindConfig    = "config"
	KindSecret    = "secret"
)

// FileRecord is one installed path.
type FileRecord struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256,omitempty"`
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Mode   string `json:"mode"`
}

// Immutable reports whether the record's content is fixed by the release.
func (f FileRecord) Immutable() bool { return f.Kind == KindDir || f.Kind == KindFile }

// Perm returns the record's permission bits.
func (f FileRecord) Perm() fs.FileMode {
	m, _ := strconv.ParseUint(f.Mode, 8, 32)
	return fs.FileMode(m)
}

func rec(path, kind string, uid, gid int, mode fs.FileMode, digest string) FileRecord {
	return FileRecord{Path: path, Kind: kind, SHA256: digest, UID: uid, GID: gid, Mode: fmt.Sprintf("%04o", uint32(mode))}
}

// expectedFiles lists the installation's paths in receipt order; digests
// maps immutable file paths to their SHA-256.
func expectedFiles(gate, worker Identity, digests map[string]string) []FileRecord {
	files := []FileRecord{
		rec(Prefix, KindDir, 0, 0, 0o755, ""),
		rec(BinDir, KindDir, 0, 0, 0o755, ""),
	}
	for _, b := range binaries {
		p := BinDir + "/" + b.name
		files = append(files, rec(p, KindFile, 0, 0, 0o755, digests[p]))
	}
	for _, u := range []string{GateUnit, WorkerUnit} {
		files = append(files, rec(UnitPath(u), KindFile, 0, 0, 0o644, digests[UnitPath(u)]))
	}
	return append(files,
		rec(ConfigDir, KindConfigDir, 0, 0, 0o755, ""),
		rec(GateConfig, KindConfig, 0, gate.GID, 0o640, ""),
		rec(WorkerConfig, KindConfig, 0, worker.GID, 0o640, ""),
		rec(GateEnv, KindSecret, 0, 0, 0o600, ""),
		rec(WorkerEnv, KindSecret, 0, 0, 0o600, ""),
	)
}

// Encode renders the receipt deterministically.
func (r *Receipt) Encode() []byte {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		panic("install: receipt does not encode: " + err.Error())
	}
	return append(b, '\n')
}

// DecodeReceipt strictly decodes and validates a receipt: known keys only,
// the exact path set of the layout with its owners and modes, a digest for
// every immutable file and none for the others.
func DecodeReceipt(data []byte) (*Receipt, error) {
	if len(data) > maxReceipt {
		return nil, errors.New("receipt is too large")
	}
	var probe struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(data, &probe); err == nil && probe.Format == 1 {
		return nil, ErrOneAccount
	}
	var r Receipt
	if err := strictjson.Decode(data, &r); err != nil {
		return nil, errors.New("receipt is not strict JSON of the receipt format")
	}
	if r.Format != ReceiptFormat {
		return nil, errors.New("receipt has an unknown format")
	}
	if _, err := ParseSemver(r.Version); err != nil {
		return nil, errors.New("receipt version is not vMAJOR.MINOR.PATCH")
	}
	if !ident.ValidSHA(r.Commit) {
		return nil, errors.New("receipt commit is not 40 lowercase hex digits")
	}
	if r.SchemaVersion < 1 || r.SchemaVersion > 1<<20 {
		return nil, errors.New("receipt schema version is out of range")
	}
	if r.Arch != "amd64" && r.Arch != "arm64" {
		return nil, errors.New("receipt arch is not amd64 or arm64")
	}
	if !r.Gate.valid() || !r.Worker.valid() || r.RunAsRoot != r.Gate.root() || r.RunAsRoot != r.Worker.root() ||
		(!r.RunAsRoot && (r.Gate.UID == r.Worker.UID || r.Gate.GID == r.Worker.GID || r.Gate.UID == 0 || r.Worker.UID == 0 || r.Gate.GID == 0 || r.Worker.GID == 0)) {
		return nil, errors.New("receipt service identities are inconsistent")
	}
	if host, port, err := net.SplitHostPort(r.Listen); err != nil || host != "127.0.0.1" || port == "" || port == "0" {
		return nil, errors.New("receipt listen address is not a loopback port")
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return nil, errors.New("receipt listen address is not a loopback port")
	}
	digests := map[string]string{}
	for _, f := range r.Files {
		if f.Kind == KindFile {
			digests[f.Path] = f.SHA256
		}
	}
	want := expectedFiles(r.Gate, r.Worker, digests)
	if len(r.Files) != len(want) {
		return nil, errors.New("receipt does not list exactly the installed paths")
	}
	for i, f := range r.Files {
		if f != want[i] {
			return nil, fmt.Errorf("receipt entry %d does not match the layout", i+1)
		}
		if (f.Kind == KindFile) != ident.ValidSHA256(f.SHA256) {
			return nil, fmt.Errorf("receipt entry %d has a missing or unexpected digest", i+1)
		}
	}
	return &r, nil
}

// Semver is a parsed vMAJOR.MINOR.PATCH.
type Semver [3]uint64

// ParseSemver accepts exactly vMAJOR.MINOR.PATCH without leading zeros,
// prerelease or build suffix.
func ParseSemver(s string) (Semver, error) {
	var v Semver
	bad := errors.New("not vMAJOR.MINOR.PATCH")
	if len(s) < 6 || len(s) > 64 || s[0] != 'v' {
		return v, bad
	}
	part, n := 0, 0
	start := 1
	for i := 1; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if s[i] < '0' || s[i] > '9' {
				return v, bad
			}
			continue
		}
		seg := s[start:i]
		if seg == "" || len(seg) > 18 || (len(seg) > 1 && seg[0] == '0') || part > 2 {
			return v, bad
		}
		x, _ := strconv.ParseUint(seg, 10, 64)
		v[part] = x
		part++
		n++
		start = i + 1
	}
	if n != 3 {
		return v, bad
	}
	return v, nil
}

// Compare returns -1, 0 or 1.
func (a Semver) Compare(b Semver) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
