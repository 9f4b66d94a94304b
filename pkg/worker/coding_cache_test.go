package worker

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Worker takes a base bundle only with exactly one ref, the base
// under refs/forge/base, and prerequisites it named as haves.
func TestCheckBaseBundle(t *testing.T) {
	base, have, other := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	pack := append([]byte("PACK\x00\x00\x00\x02"), binary.BigEndian.AppendUint32(nil, 7)...)
	write := func(header string) string {
		p := filepath.Join(t.TempDir(), "b.bundle")
		if err := os.WriteFile(p, append([]byte(header), pack...), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := checkBaseBundle(write("# v2 git bundle\n-"+have+" old\n"+base+" refs/forge/base\n\n"), base, []string{have}); err != nil {
		t.Fatalf("good bundle: %v", err)
	}
	for name, header := range map[string]string{
		"another ref name":     "# v2 git bundle\n" + base + " refs/heads/main\n\n",
		"another commit":       "# v2 git bundle\n" + other + " refs/forge/base\n\n",
		"two refs":             "# v2 git bundle\n" + base + " refs/forge/base\n" + other + " refs/forge/other\n\n",
		"unnamed prerequisite": "# v2 git bundle\n-" + other + "\n" + base + " refs/forge/base\n\n",
		"not a bundle":         "PACK",
	} {
		if err := checkBaseBundle(write(header), base, []string{have}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
