package metrics

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// Type is a family's metric type.
type Type string

// The types this package writes and reads.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// ContentType is the media type of the text format, version 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Label is one label of a sample.
type Label struct {
	Name, Value string
}

// Sample is one line: a full sample name (the family's, or for a
// histogram the family's with _bucket, _sum or _count), its labels in
// order, and its value.
type Sample struct {
	Name   string
	Labels []Label
	Value  float64
}

// Family is one metric and its samples (see the package documentation).
type Family struct {
	Name    string
	Help    string
	Type    Type
	Samples []Sample
}

// Add appends a sample named as the family (a counter or gauge).
func (f *Family) Add(value float64, labels ...Label) {
	f.Samples = append(f.Samples, Sample{Name: f.Name, Labels: labels, Value: value})
}

// AddHistogram appends the samples of one histogram series: its buckets
// (cumulative, the last +Inf), _sum and _count.
func (f *Family) AddHistogram(s HistogramSnapshot, labels ...Label) {
	var cum uint64
	for i, c := range s.Counts {
		cum += c
		le := math.Inf(1)
		if i < len(s.Bounds) {
			le = s.Bounds[i]
		}
		l := append(append(make([]Label, 0, len(labels)+1), labels...), Label{"le", formatFloat(le)})
		f.Samples = append(f.Samples, Sample{Name: f.Name + "_bucket", Labels: l, Value: float64(cum)})
	}
	f.Samples = append(f.Samples,
		Sample{Name: f.Name + "_sum", Labels: labels, Value: s.Sum},
		Sample{Name: f.Name + "_count", Labels: labels, Value: float64(cum)})
}

// L is a shorthand for a Label.
func L(name, value string) Label { return Label{Name: name, Value: value} }

// Encode returns the canonical text of fams, or an error (naming no
// value) when they break a rule of the format.
func Encode(fams []Family) ([]byte, error) {
	var b bytes.Buffer
	for _, f := range fams {
		b.WriteString("# HELP ")
		b.WriteString(f.Name)
		b.WriteByte(' ')
		b.WriteString(helpEscaper.Replace(f.Help))
		b.WriteString("\n# TYPE ")
		b.WriteString(f.Name)
		b.WriteByte(' ')
		b.WriteString(string(f.Type))
		b.WriteByte('\n')
		for _, s := range f.Samples {
			b.WriteString(s.Name)
			if len(s.Labels) > 0 {
				b.WriteByte('{')
				for i, l := range s.Labels {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(l.Name)
					b.WriteString(`="`)
					b.WriteString(labelEscaper.Replace(l.Value))
					b.WriteByte('"')
				}
				b.WriteByte('}')
			}
			b.WriteByte(' ')
			b.WriteString(formatFloat(s.Value))
			b.WriteByte('\n')
		}
	}
	if _, err := Parse(b.Bytes()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// formatFloat is the canonical text of a value.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
