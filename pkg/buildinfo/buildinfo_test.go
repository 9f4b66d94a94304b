package buildinfo

import "testing"

func TestLineNamesBinaryVersionAndCommit(t *testing.T) {
	if got, want := Line("forge"), "forge "+Version()+" "+Commit(); got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
	if Version() == "" || Commit() == "" {
		t.Fatal("empty defaults")
	}
}
