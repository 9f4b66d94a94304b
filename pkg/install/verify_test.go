package install

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

// SHA256SUMS is exactly the six Linux entries of the version, in the
// builder's byte-wise order and exact sha256sum text form.
func TestParseSumsIsExact(t *testing.T) {
	const v = "v1.2.3"
	d := strings.Repeat("c", 64)
	var lines []string
	for _, n := range manifestNames(v) {
		lines = append(lines, d+"  "+n)
	}
	join := func(ls []string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }
	if _, err := ParseSums(join(lines), v); err != nil {
		t.Fatalf("the six Linux entries: %v", err)
	}
	darwin := d + "  agent-forge-worker_v1.2.3_darwin_amd64.tar.gz"
	mod := func(f func([]string) []string) []byte { return join(f(append([]string{}, lines...))) }
	bad := map[string][]byte{
		"builder's eight entries": mod(func(l []string) []string {
			return append(l[:4], append([]string{darwin, strings.Replace(darwin, "amd64", "arm64", 1)}, l[4:]...)...)
		}),
		"darwin instead of linux": mod(func(l []string) []string { l[4] = darwin; return l }),
		"missing entry":           mod(func(l []string) []string { return l[:5] }),
		"duplicate entry":         mod(func(l []string) []string { l[1] = l[0]; return l }),
		"swapped order":           mod(func(l []string) []string { l[0], l[1] = l[1], l[0]; return l }),
		"other version":           mod(func(l []string) []string { l[0] = strings.Replace(l[0], v, "v1.2.4", 1); return l }),
		"binary marker":           mod(func(l []string) []string { l[0] = strings.Replace(l[0], "  ", " *", 1); return l }),
		"one space":               mod(func(l []string) []string { l[0] = strings.Replace(l[0], "  ", " ", 1); return l }),
		"uppercase digest":        mod(func(l []string) []string { l[0] = strings.ToUpper(d) + l[0][64:]; return l }),
		"short digest":            mod(func(l []string) []string { l[0] = l[0][1:]; return l }),
		"trailing space":          mod(func(l []string) []string { l[2] += " "; return l }),
		"CRLF":                    []byte(strings.Join(lines, "\r\n") + "\r\n"),
		"blank line":              mod(func(l []string) []string { return append(l, "") }),
		"leading blank":           append([]byte("\n"), join(lines)...),
		"no final newline":        bytes.TrimSuffix(join(lines), []byte("\n")),
		"path prefix":             mod(func(l []string) []string { l[0] = strings.Replace(l[0], "  ", "  ./", 1); return l }),
		"empty":                   nil,
	}
	for name, data := range bad {
		if _, err := ParseSums(data, v); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The tar allowlist refuses every member that is not exactly expected.
func TestReadArchiveAllowlist(t *testing.T) {
	const v, c = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	good := func() []tarMember {
		var ms []tarMember
		for _, name := range archiveMembers["gate"] {
			data, mode := []byte("bin"), int64(0o755)
			if name == "VERSION" {
				data, mode = []byte(v+" "+c+"\n"), 0o644
			}
			ms = append(ms, tarMember{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), Format: tar.FormatUSTAR}, data})
		}
		return ms
	}
	if _, err := ReadArchive(tarGz(t, good()), "gate", v, c); err != nil {
		t.Fatalf("good archive: %v", err)
	}
	link := func(typ byte) func(ms []tarMember) []tarMember {
		return func(ms []tarMember) []tarMember {
			ms[1].hdr.Typeflag, ms[1].hdr.Linkname, ms[1].hdr.Size, ms[1].data = typ, "VERSION", 0, nil
			return ms
		}
	}
	bad := map[string]func([]tarMember) []tarMember{
		"symlink":  link(tar.TypeSymlink),
		"hardlink": link(tar.TypeLink),
		"char device": func(ms []tarMember) []tarMember {
			ms[1].hdr.Typeflag, ms[1].hdr.Size, ms[1].data = tar.TypeChar, 0, nil
			return ms
		},
		"fifo": func(ms []tarMember) []tarMember {
			ms[1].hdr.Typeflag, ms[1].hdr.Size, ms[1].data = tar.TypeFifo, 0, nil
			return ms
		},
		"directory": func(ms []tarMember) []tarMember {
			return append([]tarMember{{tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}, nil}}, ms...)
		},
		"absolute":   func(ms []tarMember) []tarMember { ms[1].hdr.Name = "/forge-gate"; return ms },
		"dotdot":     func(ms []tarMember) []tarMember { ms[1].hdr.Name = "../forge-gate"; return ms },
		"dot slash":  func(ms []tarMember) []tarMember { ms[1].hdr.Name = "./forge-gate"; return ms },
		"duplicate":  func(ms []tarMember) []tarMember { return append(ms, ms[1]) },
		"unexpected": func(ms []tarMember) []tarMember { ms[1].hdr.Name = "forge-worker"; return ms },
		"extra member": func(ms []tarMember) []tarMember {
			return append(ms, tarMember{tar.Header{Name: "zz", Typeflag: tar.TypeReg, Mode: 0o644}, nil})
		},
		"missing member": func(ms []tarMember) []tarMember { return ms[:1] },
		"wrong order":    func(ms []tarMember) []tarMember { ms[0], ms[1] = ms[1], ms[0]; return ms },
		"mode 0775":      func(ms []tarMember) []tarMember { ms[1].hdr.Mode = 0o775; return ms },
		"setuid":         func(ms []tarMember) []tarMember { ms[1].hdr.Mode = 0o4755; return ms },
		"VERSION 0755":   func(ms []tarMember) []tarMember { ms[0].hdr.Mode = 0o755; return ms },
		"VERSION other":  func(ms []tarMember) []tarMember { ms[0].data = []byte("v9.9.9 " + c + "\n"); return ms },
		"huge member": func(ms []tarMember) []tarMember {
			// The declared size alone is refused: nothing is read.
			ms[1].hdr.Size, ms[1].data = maxMember+1, nil
			return ms
		},
	}
	for name, f := range bad {
		if _, err := ReadArchive(tarGz(t, f(good())), "gate", v, c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Trailing data after the tar end, and a second gzip member.
	arch := tarGz(t, good())
	var extra bytes.Buffer
	zw := gzip.NewWriter(&extra)
	zw.Write([]byte("more"))
	zw.Close()
	if _, err := ReadArchive(append(append([]byte{}, arch...), extra.Bytes()...), "gate", v, c); err == nil {
		t.Error("a second gzip member: accepted")
	}
}
