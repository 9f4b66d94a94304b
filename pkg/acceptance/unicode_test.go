package acceptance

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTextRoundTripThroughEverything: awkward but valid text survives
// submit → SQLite → lease → Worker → reference plugin → result → API
// byte for byte (upper-cased), and an input whose upper case outgrows the
// 64 KiB output limit fails cleanly (plugin failure, retried, then
// max_attempts_exceeded) instead of breaking the protocol.
func TestTextRoundTripThroughEverything(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{maxAttempts: 2, retryBase: "50ms"})
	g.startWorker(t, workerOpts{concurrency: 1})
	inputs := []string{
		"a\x00b\u2028c\u2029d\U0001F600e\u202ef\u0301g\ufeffh",
		"\"quoted\" \\backslash\\ \t tab \n newline </script>",
		strings.Repeat("é", 32768), // 65,536 bytes
	}
	ids := make([]string, len(inputs))
	for i, in := range inputs {
		b, _ := json.Marshal(map[string]string{"input": in})
		ids[i] = g.submit(t, string(b))
	}
	for i, in := range inputs {
		j := g.waitTerminal(t, ids[i])
		if j.Status != "succeeded" || j.Result == nil || *j.Result != strings.ToUpper(in) {
			t.Fatalf("input %d: %+v", i, j)
		}
	}
	grow, _ := json.Marshal(map[string]string{"input": strings.Repeat("\u023f", 32768)}) // upper case: 3 bytes each
	id := g.submit(t, string(grow))
	j := g.waitTerminal(t, id)
	a := g.aggregate(t, id)
	if j.Status != "failed" || j.FailureCode != "max_attempts_exceeded" || len(a.Attempts) != 2 || a.Attempts[0].FailureCode != "plugin_failed" {
		t.Fatalf("growing input: %+v %+v", j, a.Attempts)
	}
}
