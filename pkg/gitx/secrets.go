package gitx

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/secretscan"
)

// zeroOID is the object id of a deleted side in raw diff output.
const zeroOID = "0000000000000000000000000000000000000000"

// SecretScanBytes bounds what the cat-file stream of one FindSecret may
// write: far past any change the command's timeout lets through (the scan
// reads ~480 MB/s), so in practice the Runner's Timeout bounds it.
const SecretScanBytes = 64 << 30

// errSecretFound stops the cat-file stream at the first hit.
var errSecretFound = errors.New("secret found")

// ErrBatch is a cat-file --batch answer that is not the one asked for.
var ErrBatch = errors.New("gitx: malformed cat-file output")

// FindSecret scans a change for the values of sets (pkg/secretscan): every
// changed path, then every blob the change adds or modifies (file
// contents and symlink targets; each distinct blob once, gitlinks
// skipped), streamed through one cat-file --batch in gitDir in bounded
// memory. It returns found and the path of the first file whose content
// holds a value; path is "" when a path itself holds one (and must then
// not be named).
func (r *Runner) FindSecret(ctx context.Context, gitDir string, changes []Change, sets ...*secretscan.Set) (path string, found bool, err error) {
	var live []*secretscan.Set
	for _, s := range sets {
		if s.Len() > 0 {
			live = append(live, s)
		}
	}
	if len(live) == 0 {
		return "", false, nil
	}
	scs := make([]*secretscan.Scanner, len(live))
	for i, s := range live {
		scs[i] = s.Scanner()
	}
	var stdin strings.Builder
	var blobs []Change
	seen := map[string]bool{}
	for _, c := range changes {
		for _, s := range live {
			if s.Contains([]byte(c.Path)) {
				return "", true, nil
			}
		}
		if c.NewSHA == zeroOID || c.NewMode == ModeGitlink || seen[c.NewSHA] {
			continue
		}
		seen[c.NewSHA] = true
		blobs = append(blobs, c)
		stdin.WriteString(c.NewSHA + "\n")
	}
	if len(blobs) == 0 {
		return "", false, nil
	}
	w := make([]io.Writer, len(scs))
	for i, sc := range scs {
		w[i] = sc
	}
	all := io.MultiWriter(w...)
	hit := ""
	err = r.Stream(ctx, Cmd{GitDir: gitDir, Stdin: []byte(stdin.String()), Args: []string{"cat-file", "--batch"}},
		SecretScanBytes, func(rd io.Reader) error {
			br := bufio.NewReaderSize(rd, 64<<10)
			buf := make([]byte, 64<<10)
			for _, b := range blobs {
				size, err := blobHeader(br, b.NewSHA)
				if err != nil {
					return err
				}
				for _, sc := range scs {
					sc.Reset()
				}
				if n, err := io.CopyBuffer(all, io.LimitReader(br, size), buf); err != nil || n != size {
					return ErrBatch
				}
				if nl, err := br.ReadByte(); err != nil || nl != '\n' {
					return ErrBatch
				}
				for _, sc := range scs {
					if sc.Found() {
						hit = b.Path
						return errSecretFound
					}
				}
			}
			return nil
		})
	switch {
	case errors.Is(err, errSecretFound):
		return hit, true, nil
	case err != nil:
		return "", false, err
	}
	return "", false, nil
}

// blobHeader reads one "<sha> blob <size>\n" line of cat-file --batch.
func blobHeader(br *bufio.Reader, sha string) (int64, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, ErrBatch
	}
	f := strings.Fields(string(line))
	if len(f) != 3 || f[0] != sha || f[1] != "blob" {
		return 0, ErrBatch
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || n < 0 {
		return 0, ErrBatch
	}
	return n, nil
}
