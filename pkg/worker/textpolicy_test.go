package worker

import (
	"reflect"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/policy"
)

// The text executor decodes a policy document once while the same bytes
// keep coming; another document, valid or not, is decoded on its own and
// never answered from the memo.
func TestTextExecutorPolicyMemo(t *testing.T) {
	x := NewTextExecutor(&Config{}, func(string) (string, bool) { return "", false }, nil)
	a, b := testPolicy("reference", "PATH"), testPolicy("other")
	for i, c := range []struct {
		raw []byte
		ok  bool
	}{{a, true}, {a, true}, {b, true}, {[]byte(`{"schema":1}`), false}, {a, true}, {b, true}} {
		got, err := x.policy(c.raw)
		want, wantErr := policy.Decode(c.raw)
		if (err == nil) != c.ok || (wantErr == nil) != c.ok {
			t.Fatalf("case %d: error %v, policy.Decode %v", i, err, wantErr)
		}
		if c.ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: %+v, policy.Decode %+v", i, got, want)
		}
	}
}
