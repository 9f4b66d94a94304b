package testseed

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"a.json": "1", "b.json": "2", "c.txt": "3"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := Read(t, filepath.Join(dir, "*.json"))
	if len(got) != 2 || string(got["a.json"]) != "1" || string(got["b.json"]) != "2" {
		t.Fatalf("Read = %q", got)
	}
}
