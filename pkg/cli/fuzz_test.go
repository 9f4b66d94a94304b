package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
	"github.com/0k-lab/agent-forge/pkg/testseed"
)

// FuzzDecodeTask: never panics; an accepted task re-encodes to a body that
// is accepted again and decodes to the same task.
func FuzzDecodeTask(f *testing.F) {
	testseed.Add(f, "testdata/seed/task*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := DecodeTask(data)
		if err != nil {
			if task != nil {
				t.Fatal("task returned with an error")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatal("multi-line error")
			}
			return
		}
		body, err := task.encode()
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeTask(body)
		if err != nil {
			t.Fatalf("canonical body rejected: %v", err)
		}
		if !reflect.DeepEqual(task, again) {
			t.Fatal("round trip changed the task")
		}
	})
}

// FuzzDecodeAggregate: never panics; an accepted, valid aggregate prints as
// JSON that decodes and validates to the same value.
func FuzzDecodeAggregate(f *testing.F) {
	testseed.Add(f, "testdata/seed/aggregate*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		var g Aggregate
		if err := strictjson.Decode(data, &g); err != nil {
			if !reflect.DeepEqual(g, Aggregate{}) {
				t.Fatal("value returned with error")
			}
			return
		}
		if g.Validate() != nil {
			return
		}
		out, err := json.Marshal(&g)
		if err != nil {
			t.Fatal(err)
		}
		var again Aggregate
		if err := strictjson.Decode(out, &again); err != nil {
			t.Fatalf("printed aggregate rejected: %v", err)
		}
		if err := again.Validate(); err != nil {
			t.Fatalf("printed aggregate invalid: %v", err)
		}
		out2, _ := json.Marshal(&again)
		if string(out) != string(out2) {
			t.Fatal("printing is not stable")
		}
	})
}

// FuzzDecodeActivity: never panics; an accepted, valid activity answer
// re-encodes to one that is accepted and valid again.
func FuzzDecodeActivity(f *testing.F) {
	testseed.Add(f, "testdata/seed/activity*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		var a activityAnswer
		if err := strictjson.Decode(data, &a); err != nil || a.validate() != nil {
			return
		}
		out, err := json.Marshal(&a)
		if err != nil {
			t.Fatal(err)
		}
		var again activityAnswer
		if err := strictjson.Decode(out, &again); err != nil || again.validate() != nil {
			t.Fatalf("re-encoded answer rejected: %v", err)
		}
		if !reflect.DeepEqual(a, again) {
			t.Fatal("round trip changed the answer")
		}
	})
}
