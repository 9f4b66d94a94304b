package strictjson

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// BenchmarkCheck compares the scanner with the tokenizer-based reference
// on a document that uses every shape (testdata/seed/wide.json).
func BenchmarkCheck(b *testing.B) {
	doc, err := os.ReadFile(filepath.Join("testdata", "seed", "wide.json"))
	if err != nil {
		b.Fatal(err)
	}
	typ := reflect.TypeOf(wide{})
	for _, c := range []struct {
		name  string
		check func([]byte, reflect.Type) error
	}{{"scanner", Check}, {"reference", refCheck}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for i := 0; i < b.N; i++ {
				if err := c.check(doc, typ); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
