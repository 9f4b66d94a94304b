package gitx

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// packBuilder writes packs entry by entry, as a hostile sender could.
type packBuilder struct {
	body    bytes.Buffer
	offsets []int64
}

func (b *packBuilder) header(typ int, size int64) {
	c := byte(typ<<4) | byte(size&15)
	size >>= 4
	for size > 0 {
		b.body.WriteByte(c | 0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	b.body.WriteByte(c)
}

func deflate(data []byte) []byte {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(data)
	w.Close()
	return z.Bytes()
}

// whole adds a non-delta object.
func (b *packBuilder) whole(typ int, data []byte) int {
	b.offsets = append(b.offsets, 12+int64(b.body.Len()))
	b.header(typ, int64(len(data)))
	b.body.Write(deflate(data))
	return len(b.offsets) - 1
}

// ofs adds an offset delta on entry base.
func (b *packBuilder) ofs(base int, delta []byte) int {
	start := 12 + int64(b.body.Len())
	b.offsets = append(b.offsets, start)
	b.header(packOfsDelta, int64(len(delta)))
	d := start - b.offsets[base]
	enc := []byte{byte(d & 0x7f)}
	for d >>= 7; d > 0; d >>= 7 {
		d--
		enc = append([]byte{byte(0x80 | d&0x7f)}, enc...)
	}
	b.body.Write(enc)
	b.body.Write(deflate(delta))
	return len(b.offsets) - 1
}

// ref adds a reference delta on the object id base (20 bytes).
func (b *packBuilder) ref(base []byte, delta []byte) {
	b.offsets = append(b.offsets, 12+int64(b.body.Len()))
	b.header(packRefDelta, int64(len(delta)))
	b.body.Write(base)
	b.body.Write(deflate(delta))
}

func (b *packBuilder) bytes() []byte {
	var p bytes.Buffer
	p.WriteString("PACK")
	binary.Write(&p, binary.BigEndian, uint32(2))
	binary.Write(&p, binary.BigEndian, uint32(len(b.offsets)))
	p.Write(b.body.Bytes())
	sum := sha1.Sum(p.Bytes())
	p.Write(sum[:])
	return p.Bytes()
}

func varint(v int64) []byte {
	var out []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

// copyDelta is a valid delta from a base of baseSize bytes to a result of
// n copies of its first chunk bytes (chunk ≤ baseSize, < 2^24).
func copyDelta(baseSize, chunk, n int64) []byte {
	d := append(varint(baseSize), varint(chunk*n)...)
	ins := []byte{0x80 | 0x10 | 0x20 | 0x40, byte(chunk), byte(chunk >> 8), byte(chunk >> 16)}
	for i := int64(0); i < n; i++ {
		d = append(d, ins...)
	}
	return d
}

// deltaBomb is the review's case: a 64 KiB blob and three deltas on it
// of 1 GiB each, a few hundred bytes in all.
func deltaBomb() []byte {
	var b packBuilder
	base := b.whole(packBlob, make([]byte, 64<<10))
	for i := 0; i < 3; i++ {
		b.ofs(base, copyDelta(64<<10, 64<<10, 1<<14))
	}
	return b.bytes()
}

var testLimits = PackLimits{Objects: 1000, ObjectBytes: 64 << 20, TotalBytes: 256 << 20, Depth: 50}

func TestScanPackGit(t *testing.T) {
	dir := t.TempDir()
	run := func(stdin string, args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	run("", "init", "-q")
	// Similar blobs, so pack-objects writes offset deltas.
	var ids []string
	text := strings.Repeat("line of text that repeats\n", 400)
	for i := 0; i < 20; i++ {
		f := filepath.Join(dir, "f")
		os.WriteFile(f, []byte(text+strings.Repeat("x", i)), 0o644)
		ids = append(ids, run("", "hash-object", "-w", "f"))
	}
	name := run(strings.Join(ids, "\n")+"\n", "pack-objects", "-q", "--delta-base-offset", filepath.Join(dir, "out"))
	pack, err := os.ReadFile(filepath.Join(dir, "out-"+name+".pack"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ScanPack(bytes.NewReader(pack), testLimits)
	if err != nil || s.Objects != 20 || s.MaxDepth == 0 || len(s.RefBases) != 0 {
		t.Fatalf("git's pack: %+v %v", s, err)
	}
	if _, err := ScanPack(bytes.NewReader(pack), PackLimits{Objects: 1000, ObjectBytes: 64 << 20, TotalBytes: 256 << 20, Depth: s.MaxDepth - 1}); !IsPackLimit(err) {
		t.Fatalf("depth past the bound: %v", err)
	}
	if _, err := ScanPack(bytes.NewReader(pack), PackLimits{Objects: 19, ObjectBytes: 64 << 20, TotalBytes: 256 << 20, Depth: 50}); !IsPackLimit(err) {
		t.Fatalf("objects past the bound: %v", err)
	}
	if _, err := ScanPack(bytes.NewReader(append(pack, 0)), testLimits); err == nil || IsPackLimit(err) {
		t.Fatalf("junk after the checksum: %v", err)
	}
	pack[len(pack)-1] ^= 1
	if _, err := ScanPack(bytes.NewReader(pack), testLimits); err == nil || IsPackLimit(err) {
		t.Fatalf("bad checksum: %v", err)
	}
}

func TestScanPackRefusals(t *testing.T) {
	bomb := deltaBomb()
	if len(bomb) > 1024 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	if s, err := ScanPack(bytes.NewReader(bomb), testLimits); !IsPackLimit(err) {
		t.Fatalf("delta bomb: %+v %v", s, err)
	}
	var thin packBuilder
	id := bytes.Repeat([]byte{0xab}, 20)
	thin.ref(id, copyDelta(10, 10, 2))
	thin.ref(id, copyDelta(10, 5, 1))
	s, err := ScanPack(bytes.NewReader(thin.bytes()), testLimits)
	if err != nil || len(s.RefBases) != 1 || s.RefBases[0] != strings.Repeat("ab", 20) || s.TotalBytes != 25 {
		t.Fatalf("thin pack: %+v %v", s, err)
	}
	for name, pack := range map[string][]byte{
		"base size not the base's": func() []byte {
			var b packBuilder
			b.ofs(b.whole(packBlob, []byte("0123456789")), copyDelta(11, 5, 1))
			return b.bytes()
		}(),
		"offset to no entry": func() []byte {
			var b packBuilder
			b.whole(packBlob, []byte("0123456789"))
			b.offsets[0]++
			b.ofs(0, copyDelta(10, 5, 1))
			return b.bytes()
		}(),
		"size not as declared": func() []byte {
			var b packBuilder
			b.offsets = append(b.offsets, 12)
			b.header(packBlob, 5)
			b.body.Write(deflate([]byte("four")))
			return b.bytes()
		}(),
		"type 5":    func() []byte { var b packBuilder; b.whole(5, []byte("x")); return b.bytes() }(),
		"truncated": thin.bytes()[:40],
		"no header": []byte("PACX\x00\x00\x00\x02\x00\x00\x00\x00"),
	} {
		if _, err := ScanPack(bytes.NewReader(pack), testLimits); err == nil || IsPackLimit(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	deep := func(n int) []byte {
		var b packBuilder
		e := b.whole(packBlob, []byte("0123456789"))
		for i := 0; i < n; i++ {
			e = b.ofs(e, copyDelta(10, 10, 1))
		}
		return b.bytes()
	}
	if _, err := ScanPack(bytes.NewReader(deep(50)), testLimits); err != nil {
		t.Fatalf("chain of 50: %v", err)
	}
	if _, err := ScanPack(bytes.NewReader(deep(51)), testLimits); !IsPackLimit(err) {
		t.Fatalf("chain of 51: %v", err)
	}
}

// Whatever the bytes, ScanPack answers within its bounds: a refusal, or a
// scan whose figures respect the limits.
func FuzzScanPack(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/pack/*.pack")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(deltaBomb())
	lim := PackLimits{Objects: 100, ObjectBytes: 1 << 20, TotalBytes: 4 << 20, Depth: 10}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ScanPack(bytes.NewReader(b), lim)
		if err != nil {
			return
		}
		if s.Objects > lim.Objects || s.TotalBytes > lim.TotalBytes || s.MaxDepth > lim.Depth {
			t.Fatalf("scan past the limits: %+v", s)
		}
	})
}
