package policy

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func ptr(v int64) *int64 { return &v }

func TestBudgetCanonical(t *testing.T) {
	p := Resolve(sampleLifecycle(), sampleExecution())
	plain := p.Canonical()
	if bytes.Contains(plain, []byte("budget")) {
		t.Fatalf("a policy without a budget names one: %s", plain)
	}
	p.Budget = &Budget{Attempt: &Limits{MaxTokens: ptr(200000), MaxRequests: ptr(40)}, Job: &Limits{MaxTokens: ptr(500000)}}
	c := p.Canonical()
	want := string(plain[:len(plain)-1]) + `,"budget":{"attempt":{"max_tokens":200000,"max_requests":40},"job":{"max_tokens":500000}}}`
	if string(c) != want {
		t.Fatalf("canonical\n got %s\nwant %s", c, want)
	}
	back, err := Decode(c)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) || !bytes.Equal(back.Canonical(), c) {
		t.Fatalf("round trip: %+v", back.Budget)
	}
	if back.Budget.Attempt.Tokens() != 200000 || back.Budget.Attempt.Requests() != 40 ||
		back.Budget.Job.Tokens() != 500000 || back.Budget.Job.Requests() != 0 {
		t.Fatal("limits read back wrong")
	}
	var none *Limits
	if none.Tokens() != 0 || none.Requests() != 0 {
		t.Fatal("a nil part is not unbounded")
	}
	cl := p.Budget.Clone()
	*cl.Attempt.MaxTokens = 1
	if *p.Budget.Attempt.MaxTokens != 200000 {
		t.Fatal("Clone shares a limit")
	}
}

// TestBudgetDecodeRejects: every malformed budget is refused by the
// strict decoder, with an error that names the field and no value.
func TestBudgetDecodeRejects(t *testing.T) {
	p := Resolve(sampleLifecycle(), sampleExecution())
	plain := string(p.Canonical())
	with := func(budget string) string { return plain[:len(plain)-1] + `,"budget":` + budget + `}` }
	cases := map[string]string{
		"empty budget":      with(`{}`),
		"empty part":        with(`{"attempt":{}}`),
		"null budget":       with(`null`),
		"null part":         with(`{"attempt":null}`),
		"null limit":        with(`{"job":{"max_tokens":null}}`),
		"zero":              with(`{"attempt":{"max_tokens":0}}`),
		"negative":          with(`{"job":{"max_requests":-7}}`),
		"too large":         with(`{"job":{"max_requests":1125899906842625}}`),
		"float":             with(`{"job":{"max_tokens":77.5}}`),
		"string":            with(`{"job":{"max_tokens":"77"}}`),
		"unknown limit":     with(`{"job":{"max_cost":77}}`),
		"unknown part":      with(`{"day":{"max_tokens":77}}`),
		"case variant":      with(`{"Job":{"max_tokens":77}}`),
		"duplicate limit":   with(`{"job":{"max_tokens":77,"max_tokens":78}}`),
		"not an object":     with(`[77]`),
		"budget in execute": strings.Replace(plain, `"git_output_bytes":1048576`, `"git_output_bytes":1048576,"budget":{"job":{"max_tokens":77}}`, 1),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decode([]byte(doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !reflect.DeepEqual(got, Policy{}) {
				t.Fatal("value returned with error")
			}
			for _, v := range []string{"77", "1125899906842625", "-7"} {
				if strings.Contains(err.Error(), v) {
					t.Fatalf("error echoes a value: %v", err)
				}
			}
		})
	}
	// The bounds themselves are accepted.
	ok := with(`{"attempt":{"max_requests":1},"job":{"max_tokens":1125899906842624}}`)
	if _, err := Decode([]byte(ok)); err != nil {
		t.Fatalf("boundary budget refused: %v", err)
	}
}
