package metrics

import (
	"bytes"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/testseed"
)

func TestSeedsAcceptedOrRefused(t *testing.T) {
	seeds := testseed.Read(t, "testdata/seed/*.txt")
	names := make([]string, 0, len(seeds))
	for n := range seeds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		data := seeds[name]
		t.Run(name, func(t *testing.T) {
			fams, err := Parse(data)
			if strings.HasPrefix(name, "good-") {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				enc, err := Encode(fams)
				if err != nil || !bytes.Equal(enc, data) {
					t.Fatalf("does not round-trip: %v\n%s", err, enc)
				}
				return
			}
			if err == nil || fams != nil {
				t.Fatalf("accepted: %+v", fams)
			}
			if !strings.HasPrefix(err.Error(), "metrics: ") {
				t.Fatalf("error %q", err)
			}
		})
	}
}

func TestParseModel(t *testing.T) {
	fams, err := Parse(testseed.Read(t, "testdata/seed/good-all.txt")["good-all.txt"])
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 4 || fams[0].Name != "forge_jobs" || fams[0].Type != Gauge || fams[1].Type != Counter || fams[2].Type != Histogram {
		t.Fatalf("families %+v", fams)
	}
	if got := fams[2].Help; got != "Latency with a \\ and a \n." {
		t.Fatalf("help %q", got)
	}
	b := fams[2].Samples[1]
	want := Sample{Name: "lat_seconds_bucket", Labels: []Label{{"pool", "a\"b\\c\nd"}, {"le", "1"}}, Value: 2}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("bucket %+v", b)
	}
	g := fams[3].Samples
	if !math.IsNaN(g[0].Value) || !math.IsInf(g[1].Value, 1) || !math.IsInf(g[2].Value, -1) || g[3].Value != 1e21 || g[4].Value != -0.001 {
		t.Fatalf("special values %+v", g)
	}
}

func TestErrorsNameTheLineNotTheContent(t *testing.T) {
	_, err := Parse([]byte("# HELP a x\n# TYPE a gauge\na{secret=\"hunter2\"} x\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v", err)
	}
}

func TestEncodeRefusesWhatParseRefuses(t *testing.T) {
	cases := map[string][]Family{
		"bad name":        {{Name: "1a", Help: "x", Type: Gauge}},
		"bad type":        {{Name: "a", Help: "x", Type: "summary"}},
		"foreign sample":  {{Name: "a", Help: "x", Type: Gauge, Samples: []Sample{{Name: "b", Value: 1}}}},
		"reserved label":  {{Name: "a", Help: "x", Type: Gauge, Samples: []Sample{{Name: "a", Labels: []Label{{"__n", "v"}}, Value: 1}}}},
		"negative count":  {{Name: "a", Help: "x", Type: Counter, Samples: []Sample{{Name: "a", Value: -2}}}},
		"twice":           {{Name: "a", Help: "x", Type: Gauge}, {Name: "a", Help: "x", Type: Gauge}},
		"bucket on gauge": {{Name: "a", Help: "x", Type: Gauge, Samples: []Sample{{Name: "a", Labels: []Label{{"le", "1"}}, Value: 1}}}},
	}
	for name, fams := range cases {
		if b, err := Encode(fams); err == nil {
			t.Errorf("%s: encoded %q", name, b)
		}
	}
}

func TestHistogram(t *testing.T) {
	h := NewHist(0.5, 1, 2.5)
	for _, v := range []float64{0.1, 0.5, 0.75, 1, 2, 2.5, 3, 100, math.NaN()} {
		h.Observe(v)
	}
	s := h.Snapshot()
	if !reflect.DeepEqual(s.Counts, []uint64{2, 2, 2, 2}) || s.Sum != 109.85 || s.Count() != 8 {
		t.Fatalf("snapshot %+v", s)
	}
	f := Family{Name: "x_seconds", Help: "h", Type: Histogram}
	f.AddHistogram(s, L("pool", "p"))
	out, err := Encode([]Family{f})
	if err != nil {
		t.Fatal(err)
	}
	want := `# HELP x_seconds h
# TYPE x_seconds histogram
x_seconds_bucket{pool="p",le="0.5"} 2
x_seconds_bucket{pool="p",le="1"} 4
x_seconds_bucket{pool="p",le="2.5"} 6
x_seconds_bucket{pool="p",le="+Inf"} 8
x_seconds_sum{pool="p"} 109.85
x_seconds_count{pool="p"} 8
`
	if string(out) != want {
		t.Fatalf("encoded\n%s", out)
	}
}

func TestHistogramConcurrent(t *testing.T) {
	h := NewHist(1)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				h.Observe(2)
			}
		}()
	}
	wg.Wait()
	if s := h.Snapshot(); s.Counts[1] != 8000 || s.Sum != 16000 {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestNewHistRefusesBadBounds(t *testing.T) {
	for _, b := range [][]float64{{1, 1}, {2, 1}, {math.Inf(1)}, {math.NaN()}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("bounds %v accepted", b)
				}
			}()
			NewHist(b...)
		}()
	}
}

func FuzzParse(f *testing.F) {
	testseed.Add(f, "testdata/seed/*.txt")
	f.Fuzz(func(t *testing.T, data []byte) {
		fams, err := Parse(data)
		if err != nil {
			if fams != nil {
				t.Fatal("families returned with an error")
			}
			return
		}
		enc, err := Encode(fams)
		if err != nil {
			t.Fatalf("accepted text does not encode: %v", err)
		}
		if !bytes.Equal(enc, data) {
			t.Fatalf("canonical form does not round-trip:\n%q\n%q", data, enc)
		}
	})
}
