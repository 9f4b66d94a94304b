package publish

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/testseed"
)

func TestPublicationSeeds(t *testing.T) {
	for name, data := range testseed.Read(t, "testdata/publication/*.json") {
		t.Run(name, func(t *testing.T) {
			p, err := DecodePublication(bytes.NewReader(data))
			if strings.HasPrefix(name, "bad-") {
				var e *Error
				if p != nil || !asError(err, &e) || e.Code != CodePublicationBad || e.Stage != StageRefused {
					t.Fatalf("accepted or wrong error: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.NewBranch != "forge/job-123" || p.BaseBranch != "main" {
				t.Fatalf("decoded %+v", p)
			}
		})
	}
}

func TestPublicationLimits(t *testing.T) {
	good := testseed.Read(t, "testdata/publication/*.json")["good-spec-example.json"]
	set := func(field, value string) []byte {
		var m map[string]any
		json.Unmarshal(good, &m)
		m[field] = value
		b, _ := json.Marshal(m)
		return b
	}
	for name, tc := range map[string]struct {
		data []byte
		ok   bool
	}{
		"title at limit":   {set("pr_title", strings.Repeat("é", MaxTitleRunes)), true},
		"title over limit": {set("pr_title", strings.Repeat("t", MaxTitleRunes+1)), false},
		"body at limit":    {set("pr_body", strings.Repeat("b", MaxBodyRunes)), true},
		// An ASCII-only encoder (Python's json.dumps by default) writes
		// each astral character as a 12-byte surrogate-pair escape.
		"body at limit, escaped astral": {escapedBody(good, MaxBodyRunes), true},
		"body over limit":               {set("pr_body", strings.Repeat("b", MaxBodyRunes+1)), false},
		"body control char":             {set("pr_body", "a\x1bb"), false},
		"branch HEAD":                   {set("new_branch", "HEAD"), false},
		"branch refs/":                  {set("new_branch", "refs/heads/x"), false},
		"branch sha-like":               {set("new_branch", strings.Repeat("c", 40)), false},
		"ref extra level":               {set("candidate_ref", CandidatePrefix+"a/b/c"), false},
		"branch .lock part":             {set("new_branch", "forge/x.lock/y"), false},
		"branch .lock end":              {set("new_branch", "forge/x.lock"), false},
		"branch dotdot":                 {set("new_branch", "forge/a..b"), false},
		"branch reflog":                 {set("new_branch", "forge@{1}"), false},
		"branch dash":                   {set("new_branch", "-forge"), false},
		"branch unicode":                {set("new_branch", "forge/ü"), false},
		"base .lock part":               {set("base_branch", "a.lock/main"), false},
		"title newline":                 {set("pr_title", "a\nb"), false},
		"title blank":                   {set("pr_title", " \t "), false},
		"body unicode":                  {set("pr_body", "ünïcödé ✓ \u202e\n\tx"), true},
		"ref empty attempt":             {set("candidate_ref", CandidatePrefix+"a/"), false},
		"too large":                     {append(good, bytes.Repeat([]byte(" "), MaxPublicationBytes)...), false},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := DecodePublication(bytes.NewReader(tc.data))
			if (err == nil) != tc.ok || (p != nil) != tc.ok {
				t.Fatalf("ok=%v, got %v", tc.ok, err)
			}
		})
	}
}

// FuzzDecodePublication: never panics; on error returns nothing; an
// accepted publication re-encodes to a document that decodes to itself.
func FuzzDecodePublication(f *testing.F) {
	for _, data := range testseed.Read(f, "testdata/publication/*.json") {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePublication(bytes.NewReader(data))
		if err != nil {
			if p != nil {
				t.Fatal("error with a result")
			}
			if strings.ContainsAny(err.Error(), "{}\"") {
				t.Fatalf("error text echoes input: %v", err)
			}
			return
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := DecodePublication(bytes.NewReader(b))
		if err != nil || *q != *p {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// escapedBody is good with a pr_body of n astral characters, each written
// as a JSON surrogate-pair escape and the title likewise at its limit.
func escapedBody(good []byte, n int) []byte {
	var m map[string]any
	json.Unmarshal(good, &m)
	m["pr_body"], m["pr_title"] = "@BODY@", "@TITLE@"
	b, _ := json.Marshal(m)
	b = bytes.Replace(b, []byte("@BODY@"), bytes.Repeat([]byte(`\ud83d\ude00`), n), 1)
	return bytes.Replace(b, []byte("@TITLE@"), bytes.Repeat([]byte(`\ud83d\ude00`), MaxTitleRunes), 1)
}
