package gitx

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseBundleHeader(t *testing.T) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	good := "# v2 git bundle\n-" + a + " first commit\n" + b + " refs/forge/base\n\nPACK\x00\x00"
	h, err := ParseBundleHeader([]byte(good))
	if err != nil || len(h.Prerequisites) != 1 || h.Prerequisites[0] != (BundlePrerequisite{a, "first commit"}) ||
		len(h.Refs) != 1 || h.Refs[0] != (BundleRef{b, "refs/forge/base"}) || good[h.Size:] != "PACK\x00\x00" {
		t.Fatalf("%+v %v", h, err)
	}
	for name, in := range map[string]string{
		"v3":                  "# v3 git bundle\n@object-format=sha1\n" + b + " refs/x\n\nPACK",
		"no refs":             "# v2 git bundle\n-" + a + "\n\nPACK",
		"no pack":             "# v2 git bundle\n" + b + " refs/x\n\nJUNK",
		"no blank":            "# v2 git bundle\n" + b + " refs/x\nPACK",
		"short sha":           "# v2 git bundle\n" + b[:39] + " refs/x\n\nPACK",
		"upper sha":           "# v2 git bundle\n" + strings.ToUpper(b) + " refs/x\n\nPACK",
		"prereq after ref":    "# v2 git bundle\n" + b + " refs/x\n-" + a + "\n\nPACK",
		"ref outside refs/":   "# v2 git bundle\n" + b + " HEAD\n\nPACK",
		"dotdot ref":          "# v2 git bundle\n" + b + " refs/../x\n\nPACK",
		"lock ref":            "# v2 git bundle\n" + b + " refs/x.lock\n\nPACK",
		"space in ref":        "# v2 git bundle\n" + b + " refs/x y\n\nPACK",
		"cr in comment":       "# v2 git bundle\n-" + a + " x\r\n" + b + " refs/x\n\nPACK",
		"truncated":           "# v2 git bundle\n" + b + " refs/x",
		"too many refs":       "# v2 git bundle\n" + strings.Repeat(b+" refs/x\n", MaxBundleRefs+1) + "\nPACK",
		"too many prereqs":    "# v2 git bundle\n" + strings.Repeat("-"+a+"\n", MaxBundlePrerequisites+1) + b + " refs/x\n\nPACK",
		"line past its bound": "# v2 git bundle\n-" + a + " " + strings.Repeat("x", MaxBundleLineBytes) + "\n" + b + " refs/x\n\nPACK",
	} {
		if _, err := ParseBundleHeader([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A bundle git writes parses, and its header round-trips.
func TestParseBundleHeaderOfGitsBundle(t *testing.T) {
	b, err := os.ReadFile("testdata/bundle-base.bin")
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseBundleHeader(b)
	if err != nil || len(h.Refs) != 1 || h.Refs[0].Name != "refs/forge/base" {
		t.Fatalf("%+v %v", h, err)
	}
	if !bytes.Equal(FormatBundleHeader(h), b[:h.Size]) {
		t.Fatal("header does not round-trip")
	}
}

func FuzzParseBundleHeader(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bundle-*.bin")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseBundleHeader(b)
		if err != nil {
			if h.Refs != nil || h.Size != 0 {
				t.Fatal("error with a result")
			}
			return
		}
		if h.Size > len(b) || h.Size > MaxBundleHeaderBytes+MaxBundleLineBytes || len(h.Refs) == 0 ||
			len(h.Refs) > MaxBundleRefs || len(h.Prerequisites) > MaxBundlePrerequisites {
			t.Fatalf("out of bounds: %+v", h)
		}
		if !bytes.Equal(FormatBundleHeader(h), b[:h.Size]) {
			t.Fatal("accepted header does not round-trip")
		}
	})
}
