package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

func sampleExecution() Execution {
	return Execution{
		PluginID:          "reference",
		Environment:       []string{"PATH", "CODEX_HOME"},
		PluginTimeout:     Duration(15 * time.Minute),
		CheckTimeout:      Duration(10 * time.Minute),
		GitTimeout:        Duration(time.Minute),
		CleanupTimeout:    Duration(10 * time.Second),
		PluginOutputBytes: 1048576,
		CheckOutputBytes:  2048,
		GitOutputBytes:    1048576,
	}
}

func sampleLifecycle() Lifecycle {
	return Lifecycle{LeaseTTL: Duration(30 * time.Second), RetryBase: Duration(time.Second), MaxAttempts: 3}
}

func TestConfigShapeDecodes(t *testing.T) {
	// The exact object from the spec's gate.json default_execution.
	const cfg = `{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}`
	var e Execution
	if err := strictjson.Decode([]byte(cfg), &e); err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if e.PluginTimeout.Std() != 15*time.Minute || e.GitOutputBytes != 1048576 || e.Environment[0] != "PATH" {
		t.Fatalf("decoded %+v", e)
	}
	var l Lifecycle
	if err := strictjson.Decode([]byte(`{"lease_ttl":"30s","retry_base":"1s","max_attempts":3}`), &l); err != nil {
		t.Fatal(err)
	}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if l.LeaseTTL.Std() != 30*time.Second || l.MaxAttempts != 3 {
		t.Fatalf("decoded %+v", l)
	}
	if err := strictjson.Decode([]byte(`{"lease_ttl":"30 s","retry_base":"1s","max_attempts":3}`), &l); err == nil {
		t.Fatal("bad duration accepted")
	}
}

func TestCanonical(t *testing.T) {
	p := Resolve(sampleLifecycle(), sampleExecution())
	got := string(p.Canonical())
	want := `{"schema":"forge-policy/v1","lifecycle":{"backoff":"exponential-v1","lease_ttl":"30s","retry_base":"1s","max_attempts":3},"execution":{"plugin_id":"reference","environment":["CODEX_HOME","PATH"],"plugin_timeout":"15m0s","check_timeout":"10m0s","git_timeout":"1m0s","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}`
	if got != want {
		t.Fatalf("canonical\n got %s\nwant %s", got, want)
	}
	// Resolve does not modify its input.
	e := sampleExecution()
	Resolve(sampleLifecycle(), e)
	if e.Environment[0] != "PATH" {
		t.Fatal("Resolve sorted the caller's slice")
	}
	// Same inputs, same bytes; decode round-trips.
	if !bytes.Equal(p.Canonical(), Resolve(sampleLifecycle(), sampleExecution()).Canonical()) {
		t.Fatal("canonical not deterministic")
	}
	back, err := Decode([]byte(got))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) || string(back.Canonical()) != got {
		t.Fatalf("round trip: %+v", back)
	}
	empty := sampleExecution()
	empty.Environment = nil
	c := Resolve(sampleLifecycle(), empty).Canonical()
	if !bytes.Contains(c, []byte(`"environment":[]`)) {
		t.Fatalf("empty environment not []: %s", c)
	}
	if _, err := Decode(c); err != nil {
		t.Fatal(err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]func(*Execution){
		"empty plugin":       func(e *Execution) { e.PluginID = "" },
		"upper plugin":       func(e *Execution) { e.PluginID = "Codex" },
		"slash plugin":       func(e *Execution) { e.PluginID = "../x" },
		"dot first":          func(e *Execution) { e.PluginID = ".x" },
		"long plugin":        func(e *Execution) { e.PluginID = strings.Repeat("a", 65) },
		"env bad name":       func(e *Execution) { e.Environment = []string{"A=B"} },
		"env digit first":    func(e *Execution) { e.Environment = []string{"1A"} },
		"env empty":          func(e *Execution) { e.Environment = []string{""} },
		"env duplicate":      func(e *Execution) { e.Environment = []string{"PATH", "PATH"} },
		"env too many":       func(e *Execution) { e.Environment = manyNames(65) },
		"zero plugin time":   func(e *Execution) { e.PluginTimeout = 0 },
		"negative check":     func(e *Execution) { e.CheckTimeout = Duration(-time.Second) },
		"huge git":           func(e *Execution) { e.GitTimeout = Duration(25 * time.Hour) },
		"zero cleanup":       func(e *Execution) { e.CleanupTimeout = 0 },
		"zero plugin bytes":  func(e *Execution) { e.PluginOutputBytes = 0 },
		"huge check bytes":   func(e *Execution) { e.CheckOutputBytes = MaxOutputBytes + 1 },
		"negative git bytes": func(e *Execution) { e.GitOutputBytes = -1 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			e := sampleExecution()
			mutate(&e)
			if err := e.Validate(); err == nil {
				t.Fatal("accepted")
			}
			if err := Resolve(sampleLifecycle(), e).Validate(); err == nil {
				t.Fatal("policy accepted")
			}
		})
	}
	ok := sampleExecution()
	ok.Environment = manyNames(64)
	ok.PluginTimeout, ok.CheckOutputBytes = MaxTimeout, MaxOutputBytes
	if err := ok.Validate(); err != nil {
		t.Fatalf("boundary values rejected: %v", err)
	}
	for name, l := range map[string]Lifecycle{
		"zero ttl":      {LeaseTTL: 0, RetryBase: Duration(time.Second), MaxAttempts: 1},
		"short ttl":     {LeaseTTL: Duration(time.Millisecond), RetryBase: Duration(time.Second), MaxAttempts: 1},
		"zero base":     {LeaseTTL: Duration(time.Second), RetryBase: 0, MaxAttempts: 1},
		"zero attempts": {LeaseTTL: Duration(time.Second), RetryBase: Duration(time.Second), MaxAttempts: 0},
		"many attempts": {LeaseTTL: Duration(time.Second), RetryBase: Duration(time.Second), MaxAttempts: 101},
	} {
		if err := l.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func manyNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "V" + strings.Repeat("X", i)
	}
	return out
}

func TestDecodeRejects(t *testing.T) {
	good := string(Resolve(sampleLifecycle(), sampleExecution()).Canonical())
	cases := map[string]string{
		"unknown field":   strings.Replace(good, `"schema"`, `"extra":1,"schema"`, 1),
		"duplicate key":   strings.Replace(good, `"schema":"forge-policy/v1"`, `"schema":"forge-policy/v1","schema":"forge-policy/v1"`, 1),
		"case variant":    strings.Replace(good, `"schema"`, `"Schema"`, 1),
		"wrong schema":    strings.Replace(good, `forge-policy/v1`, `forge-policy/v2`, 1),
		"wrong backoff":   strings.Replace(good, `exponential-v1`, `linear`, 1),
		"null":            strings.Replace(good, `["CODEX_HOME","PATH"]`, `null`, 1),
		"trailing":        good + "{}",
		"float attempts":  strings.Replace(good, `"max_attempts":3`, `"max_attempts":3.0`, 1),
		"string bytes":    strings.Replace(good, `"check_output_bytes":2048`, `"check_output_bytes":"2048"`, 1),
		"bad duration":    strings.Replace(good, `"git_timeout":"1m0s"`, `"git_timeout":"soon"`, 1),
		"missing plugin":  strings.Replace(good, `"plugin_id":"reference",`, ``, 1),
		"empty document":  ``,
		"too large":       strings.Replace(good, `"schema"`, `"x":"`+strings.Repeat("a", MaxCanonicalBytes)+`","schema"`, 1),
		"bad utf8":        strings.Replace(good, `reference`, "refer\xffence", 1),
		"invalid attempt": strings.Replace(good, `"max_attempts":3`, `"max_attempts":0`, 1),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Decode([]byte(doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !reflect.DeepEqual(p, Policy{}) {
				t.Fatal("value returned with error")
			}
			if strings.Contains(err.Error(), "reference") || strings.Contains(err.Error(), "soon") {
				t.Fatalf("error echoes a value: %v", err)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	cases := []struct {
		base    time.Duration
		ordinal int
		want    time.Duration
	}{
		{time.Second, 1, time.Second},
		{time.Second, 2, 2 * time.Second},
		{time.Second, 3, 4 * time.Second},
		{time.Second, 0, time.Second},
		{time.Second, -5, time.Second},
		{time.Second, 17, 65536 * time.Second},
		{time.Second, 18, 24 * time.Hour},
		{time.Second, 1 << 40, 24 * time.Hour},
		{time.Nanosecond, 1 << 62, 24 * time.Hour},
		{48 * time.Hour, 1, 24 * time.Hour},
		{12 * time.Hour, 2, 24 * time.Hour},
		{0, 5, 0},
		{time.Duration(1<<62 + 1), 3, 24 * time.Hour},
	}
	for _, c := range cases {
		if got := Backoff(c.base, c.ordinal); got != c.want {
			t.Errorf("Backoff(%v, %d) = %v, want %v", c.base, c.ordinal, got, c.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "seed", "*.json"))
	if len(seeds) == 0 {
		f.Fatal("no seeds")
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			if !reflect.DeepEqual(p, Policy{}) {
				t.Fatal("value returned with error")
			}
			return
		}
		c := p.Canonical()
		again, err := Decode(c)
		if err != nil {
			t.Fatalf("canonical form rejected: %v", err)
		}
		if !bytes.Equal(again.Canonical(), c) {
			t.Fatal("canonical form not stable")
		}
		if !reflect.DeepEqual(again, p) {
			t.Fatal("canonical form decodes differently")
		}
	})
}

// network_allow is optional and absent from the canonical document when
// empty (older documents keep their bytes), sorted when present, decoded
// back, and checked entry by entry; network_checks needs it.
func TestNetworkAllow(t *testing.T) {
	plain := Resolve(sampleLifecycle(), sampleExecution()).Canonical()
	if bytes.Contains(plain, []byte("network")) {
		t.Fatalf("empty network_allow in %s", plain)
	}
	e := sampleExecution()
	e.NetworkAllow = []string{"registry.npmjs.org:443", "proxy.golang.org:443"}
	e.NetworkChecks = true
	p := Resolve(sampleLifecycle(), e)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	c := p.Canonical()
	if !bytes.Contains(c, []byte(`"network_allow":["proxy.golang.org:443","registry.npmjs.org:443"],"network_checks":true}`)) {
		t.Fatalf("canonical %s", c)
	}
	back, err := Decode(c)
	if err != nil || !bytes.Equal(back.Canonical(), c) {
		t.Fatalf("decode %v %v", back, err)
	}
	for name, mut := range map[string]func(*Execution){
		"upper case":     func(e *Execution) { e.NetworkAllow = []string{"Registry.npmjs.org:443"} },
		"no port":        func(e *Execution) { e.NetworkAllow = []string{"registry.npmjs.org"} },
		"wildcard":       func(e *Execution) { e.NetworkAllow = []string{"*.npmjs.org:443"} },
		"duplicate":      func(e *Execution) { e.NetworkAllow = []string{"a.test:1", "a.test:1"} },
		"checks without": func(e *Execution) { e.NetworkAllow = nil; e.NetworkChecks = true },
	} {
		e := sampleExecution()
		mut(&e)
		if err := e.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
