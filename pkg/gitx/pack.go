package gitx

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"io"
)

// A pack received from a party we do not trust is scanned here before git
// reads it: git resolves every delta it is given, and a few hundred bytes
// of deltas can declare gigabytes of results. ScanPack reads each entry's
// header and inflates its data (never applying a delta), so what git will
// allocate is known, and bounded, before it starts.

// PackLimits bound what ScanPack accepts.
type PackLimits struct {
	// Objects bounds the number of entries.
	Objects int
	// ObjectBytes bounds one object's size: a whole object's, or the
	// result a delta declares.
	ObjectBytes int64
	// TotalBytes bounds the sum of those sizes over the pack: about what
	// resolving every delta produces.
	TotalBytes int64
	// Depth bounds a delta chain inside the pack (offset deltas, and a
	// delta on a base outside the pack counted as one).
	Depth int
}

// PackScan is what ScanPack learnt of a pack.
type PackScan struct {
	Objects    int
	TotalBytes int64
	MaxDepth   int
	// RefBases are the distinct object ids reference deltas are based
	// on, in the order first met: in a thin pack, objects the receiver
	// must already hold.
	RefBases []string
}

// Pack entry types (git's pack format).
const (
	packCommit   = 1
	packTree     = 2
	packBlob     = 3
	packTag      = 4
	packOfsDelta = 6
	packRefDelta = 7
)

var (
	errPackMalformed = errors.New("gitx: malformed pack")
	errPackLimit     = errors.New("gitx: pack beyond its bounds")
)

// IsPackLimit reports whether err is ScanPack's refusal of a pack past
// its limits (as opposed to a malformed one).
func IsPackLimit(err error) bool { return errors.Is(err, errPackLimit) }

// packReader counts what was consumed and hashes it; it is an
// io.ByteReader, so zlib reads exactly one stream and no byte beyond.
// Bytes read one at a time (zlib reads them so) reach the hash in
// batches of len(pend).
type packReader struct {
	r    *bufio.Reader
	h    hash.Hash
	off  int64
	pend [4096]byte
	np   int
	zr   io.ReadCloser // the zlib reader, reset for each entry
}

func (p *packReader) ReadByte() (byte, error) {
	b, err := p.r.ReadByte()
	if err == nil {
		if p.np == len(p.pend) {
			p.flush()
		}
		p.pend[p.np] = b
		p.np++
		p.off++
	}
	return b, err
}

func (p *packReader) Read(b []byte) (int, error) {
	p.flush()
	n, err := p.r.Read(b)
	p.h.Write(b[:n])
	p.off += int64(n)
	return n, err
}

// flush hashes the bytes ReadByte holds back.
func (p *packReader) flush() {
	p.h.Write(p.pend[:p.np])
	p.np = 0
}

// entry is what later entries need of an earlier one.
type entry struct {
	size  int64 // the object's size (a delta's result)
	depth int
}

// ScanPack reads a version 2 or 3 pack from r to its end: the header, each
// entry (type, size, delta base, data inflated to exactly the declared
// size, a delta's declared base and result sizes), the trailing checksum,
// and nothing after it. A pack outside lim is refused (IsPackLimit) as
// soon as the entry that breaks a bound is read. The error is fixed text.
func ScanPack(r io.Reader, lim PackLimits) (PackScan, error) {
	var s PackScan
	p := &packReader{r: bufio.NewReaderSize(r, 64<<10), h: sha1.New()}
	var hdr [12]byte
	if _, err := io.ReadFull(p, hdr[:]); err != nil {
		return s, errPackMalformed
	}
	if !bytes.Equal(hdr[:4], []byte("PACK")) {
		return s, errPackMalformed
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return s, errPackMalformed
	}
	count := binary.BigEndian.Uint32(hdr[8:12])
	if int64(count) > int64(lim.Objects) {
		return s, errPackLimit
	}
	byOffset := make(map[int64]entry, count)
	refSeen := map[string]bool{}
	var head [32]byte
	for i := uint32(0); i < count; i++ {
		start := p.off
		typ, size, err := entryHeader(p)
		if err != nil {
			return s, err
		}
		if size > lim.ObjectBytes {
			return s, errPackLimit
		}
		e := entry{size: size}
		var base *entry
		switch typ {
		case packCommit, packTree, packBlob, packTag:
		case packOfsDelta:
			back, err := ofsDistance(p)
			if err != nil {
				return s, err
			}
			b, ok := byOffset[start-back]
			if back <= 0 || back > start || !ok {
				return s, errPackMalformed
			}
			base = &b
		case packRefDelta:
			var id [20]byte
			if _, err := io.ReadFull(p, id[:]); err != nil {
				return s, errPackMalformed
			}
			if sha := hex.EncodeToString(id[:]); !refSeen[sha] {
				refSeen[sha] = true
				s.RefBases = append(s.RefBases, sha)
			}
			base = &entry{size: -1}
		default:
			return s, errPackMalformed
		}
		n, err := inflate(p, size, head[:])
		if err != nil {
			return s, err
		}
		if base != nil {
			baseSize, result, ok := deltaSizes(head[:min(n, int64(len(head)))])
			if !ok || (base.size >= 0 && baseSize != base.size) {
				return s, errPackMalformed
			}
			e.size, e.depth = result, base.depth+1
			if result > lim.ObjectBytes || e.depth > lim.Depth {
				return s, errPackLimit
			}
		}
		s.TotalBytes += e.size
		if s.TotalBytes > lim.TotalBytes {
			return s, errPackLimit
		}
		s.MaxDepth = max(s.MaxDepth, e.depth)
		byOffset[start] = e
		s.Objects++
	}
	p.flush()
	sum := p.h.Sum(nil)
	var trailer [20]byte
	if _, err := io.ReadFull(p.r, trailer[:]); err != nil || !bytes.Equal(trailer[:], sum) {
		return s, errPackMalformed
	}
	if _, err := p.r.ReadByte(); err != io.EOF {
		return s, errPackMalformed
	}
	return s, nil
}

// entryHeader reads an entry's type and size (a variable-length integer,
// four bits in the first byte, seven in each next one).
func entryHeader(p *packReader) (int, int64, error) {
	c, err := p.ReadByte()
	if err != nil {
		return 0, 0, errPackMalformed
	}
	typ := int(c>>4) & 7
	size := int64(c & 15)
	shift := 4
	for c&0x80 != 0 {
		if shift > 56 {
			return 0, 0, errPackMalformed
		}
		if c, err = p.ReadByte(); err != nil {
			return 0, 0, errPackMalformed
		}
		size |= int64(c&0x7f) << shift
		shift += 7
	}
	return typ, size, nil
}

// ofsDistance reads an offset delta's distance back to its base (git's
// offset encoding: big-endian groups of seven bits, each continuation
// adding one).
func ofsDistance(p *packReader) (int64, error) {
	c, err := p.ReadByte()
	if err != nil {
		return 0, errPackMalformed
	}
	d := int64(c & 0x7f)
	for c&0x80 != 0 {
		if d >= 1<<55 {
			return 0, errPackMalformed
		}
		if c, err = p.ReadByte(); err != nil {
			return 0, errPackMalformed
		}
		d = (d+1)<<7 | int64(c&0x7f)
	}
	return d, nil
}

// inflate reads one zlib stream from p, which must inflate to exactly size
// bytes, and copies its first bytes into head; it returns how many bytes
// it inflated.
func inflate(p *packReader, size int64, head []byte) (int64, error) {
	var err error
	if p.zr == nil {
		p.zr, err = zlib.NewReader(p)
	} else {
		err = p.zr.(zlib.Resetter).Reset(p, nil)
	}
	if err != nil {
		return 0, errPackMalformed
	}
	zr := p.zr
	h := &headWriter{buf: head}
	n, err := io.Copy(h, io.LimitReader(zr, size+1))
	if err != nil || n != size {
		return n, errPackMalformed
	}
	// The stream must end here (zlib checks its checksum at the end).
	var one [1]byte
	if m, err := zr.Read(one[:]); m != 0 || err != io.EOF {
		return n, errPackMalformed
	}
	return n, nil
}

// headWriter keeps the first len(buf) bytes written to it.
type headWriter struct {
	buf []byte
	n   int
}

func (h *headWriter) Write(b []byte) (int, error) {
	h.n += copy(h.buf[h.n:], b)
	return len(b), nil
}

// deltaSizes reads a delta's two leading sizes, its base's and its
// result's (little-endian groups of seven bits).
func deltaSizes(b []byte) (base, result int64, ok bool) {
	pos := 0
	read := func() (int64, bool) {
		var v int64
		for shift := 0; shift <= 56; shift += 7 {
			if pos >= len(b) {
				return 0, false
			}
			c := b[pos]
			pos++
			v |= int64(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, true
			}
		}
		return 0, false
	}
	if base, ok = read(); !ok {
		return 0, 0, false
	}
	result, ok = read()
	return base, result, ok
}

var errPackIndex = errors.New("gitx: malformed pack index")

// PackIndexIDs returns the object ids a version 2 pack index lists (as
// git index-pack writes it), in its order.
func PackIndexIDs(idx []byte) ([]string, error) {
	const head = 8 + 256*4
	if len(idx) < head || !bytes.Equal(idx[:8], []byte("\xfftOc\x00\x00\x00\x02")) {
		return nil, errPackIndex
	}
	n := int64(binary.BigEndian.Uint32(idx[head-4 : head]))
	if int64(len(idx)) < head+20*n {
		return nil, errPackIndex
	}
	ids := make([]string, n)
	for i := range ids {
		at := head + 20*i
		ids[i] = hex.EncodeToString(idx[at : at+20])
	}
	return ids, nil
}
