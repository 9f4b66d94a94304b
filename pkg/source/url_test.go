package source

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

func TestParseURL(t *testing.T) {
	const s = "https://github.com/0k-lab/agent-forge.git"
	u, err := ParseURL(s)
	if err != nil || u.Owner != "0k-lab" || u.Repo != "agent-forge" || u.String() != s {
		t.Fatalf("got %+v %v", u, err)
	}
	if u, err := ParseURL(s + "/"); err != ErrURL || u != (URL{}) {
		t.Fatalf("got %+v %v", u, err)
	}
}

func TestDirName(t *testing.T) {
	const url = "https://github.com/0k-lab/agent-forge.git"
	sum := sha256.Sum256([]byte(url))
	want := hex.EncodeToString(sum[:]) + ".git"
	if got := DirName(url); got != want || !ident.ValidPreparedName(got) {
		t.Fatalf("DirName = %q, want %q", got, want)
	}
	if got := Dir("/srv/forge/public", url); got != "/srv/forge/public/"+want {
		t.Fatalf("Dir = %q", got)
	}
}
