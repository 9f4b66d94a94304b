package install

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Size bounds for the release inputs.
const (
	maxSums    = 64 << 10
	maxArchive = 512 << 20
	maxMember  = 256 << 20
)

// archiveName is the release file name of one Linux archive.
func archiveName(kind, version, goarch string) string {
	return "agent-forge-" + kind + "_" + version + "_linux_" + goarch + ".tar.gz"
}

// manifestNames lists the six Linux archives in SHA256SUMS order.
func manifestNames(version string) []string {
	var names []string
	for _, kind := range []string{"cli", "gate", "worker"} {
		for _, arch := range []string{"amd64", "arm64"} {
			names = append(names, archiveName(kind, version, arch))
		}
	}
	return names
}

// archiveMembers lists each archive kind's members in archive order.
var archiveMembers = map[string][]string{
	"cli":    archiveOf("cli"),
	"gate":   archiveOf("gate"),
	"worker": archiveOf("worker"),
}

// archiveOf lists the members of an archive kind from binaries: VERSION,
// then its binaries in byte-wise order.
func archiveOf(kind string) []string {
	out := []string{"VERSION"}
	for _, b := range binaries {
		if b.kind == kind {
			out = append(out, b.name)
		}
	}
	return out
}

// ParseSums checks that data is exactly the six-entry Linux SHA256SUMS of
// version (sha256sum text format, byte-wise name order) and returns each
// archive's digest by name.
func ParseSums(data []byte, version string) (map[string]string, error) {
	names := manifestNames(version)
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, errors.New("SHA256SUMS must be newline-terminated lines")
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	if len(lines) != len(names) {
		return nil, fmt.Errorf("SHA256SUMS must list exactly the %d Linux archives of the version, it lists %d entries", len(names), len(lines))
	}
	sums := make(map[string]string, len(names))
	for i, line := range lines {
		digest, name, ok := strings.Cut(line, "  ")
		if !ok || !ident.ValidSHA256(digest) {
			return nil, fmt.Errorf("SHA256SUMS line %d is not \"<sha256>  <name>\"", i+1)
		}
		if name != names[i] {
			return nil, fmt.Errorf("SHA256SUMS line %d does not name the expected Linux archive of the version", i+1)
		}
		sums[name] = digest
	}
	return sums, nil
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// openFlags open a file for reading without following a final symlink and
// without blocking (a FIFO or device swapped in opens at once and is then
// refused as not regular).
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC | syscall.O_NONBLOCK

// checkAssetEntries requires the asset directory to hold exactly
// SHA256SUMS and the six Linux archives of version, plus at most the
// release's SBOM (agent-forge_V_linux.spdx.json, published beside them and
// never read): any other entry (a darwin or other-version archive, the
// forge binary, a hidden file, a directory) is refused.
func checkAssetEntries(dir, version string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return errors.New("the asset directory cannot be listed")
	}
	defer d.Close()
	want := map[string]bool{"SHA256SUMS": true}
	for _, n := range manifestNames(version) {
		want[n] = true
	}
	sbom := "agent-forge_" + version + "_linux.spdx.json"
	// Two more than the release set is enough to know it holds too much.
	names, err := d.Readdirnames(len(want) + 2)
	if err != nil && !errors.Is(err, io.EOF) {
		return errors.New("the asset directory cannot be listed")
	}
	found := 0
	for _, n := range names {
		switch {
		case want[n]:
			found++
		case n == sbom:
		default:
			return errors.New("the asset directory holds an entry that is not part of the release set (only SHA256SUMS, the six Linux archives and the release's SBOM may be there)")
		}
	}
	if found != len(want) {
		return errors.New("the asset directory does not hold SHA256SUMS and all six Linux archives")
	}
	return nil
}

// readAsset reads one regular, non-symlink file of the asset directory.
func readAsset(dir, name string, max int64) ([]byte, error) {
	fd, err := os.OpenFile(filepath.Join(dir, name), openFlags, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errors.New("is missing")
		}
		return nil, errors.New("cannot be opened (symlinks are refused)")
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(fd, max+1))
	if err != nil {
		return nil, errors.New("cannot be read")
	}
	if int64(len(b)) > max {
		return nil, errors.New("is too large")
	}
	return b, nil
}

// Member is one extracted archive member.
type Member struct {
	Name string
	Mode fs.FileMode
	Data []byte
}

// ReadArchive applies the strict allowlist to a release tar.gz of kind
// ("cli", "gate", "worker"): exactly the expected members in order, each a
// regular file with the expected mode, no links, devices, directories,
// absolute or dotted paths, or duplicates, and a VERSION naming version and
// commit. It returns the members.
func ReadArchive(data []byte, kind, version, commit string) ([]Member, error) {
	want, ok := archiveMembers[kind]
	if !ok {
		return nil, errors.New("unknown archive kind")
	}
	raw := bytes.NewReader(data)
	zr, err := gzip.NewReader(raw)
	if err != nil {
		return nil, errors.New("archive is not gzip")
	}
	zr.Multistream(false)
	tr := tar.NewReader(zr)
	var members []Member
	var total int64
	for i := 0; ; i++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errors.New("archive is not a valid tar")
		}
		if i >= len(want) {
			return nil, errors.New("archive has an unexpected extra member")
		}
		if h.Name != want[i] {
			return nil, fmt.Errorf("archive member %d is not the expected %s", i+1, want[i])
		}
		if h.Typeflag != tar.TypeReg || h.Linkname != "" {
			return nil, fmt.Errorf("archive member %s is not a regular file", want[i])
		}
		wantMode := int64(0o755)
		if h.Name == "VERSION" {
			wantMode = 0o644
		}
		if h.Mode != wantMode {
			return nil, fmt.Errorf("archive member %s has mode %s, want %s", want[i], strconv.FormatInt(h.Mode, 8), strconv.FormatInt(wantMode, 8))
		}
		if h.Size < 0 || h.Size > maxMember || total+h.Size > maxArchive {
			return nil, fmt.Errorf("archive member %s is too large", want[i])
		}
		total += h.Size
		b, err := io.ReadAll(io.LimitReader(tr, h.Size+1))
		if err != nil || int64(len(b)) != h.Size {
			return nil, fmt.Errorf("archive member %s is truncated", want[i])
		}
		members = append(members, Member{Name: h.Name, Mode: fs.FileMode(wantMode), Data: b})
	}
	if len(members) != len(want) {
		return nil, errors.New("archive lacks an expected member")
	}
	// Nothing may follow the tar end-of-archive within the gzip stream.
	rest, err := io.ReadAll(io.LimitReader(zr, 1<<16+1))
	if err != nil || len(rest) > 1<<16 || len(bytes.Trim(rest, "\x00")) != 0 || raw.Len() != 0 {
		return nil, errors.New("archive has trailing data")
	}
	if string(members[0].Data) != version+" "+commit+"\n" {
		return nil, errors.New("archive VERSION does not name the requested version and commit")
	}
	return members, nil
}
