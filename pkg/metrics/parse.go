package metrics

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse reads the canonical text format (package documentation). On error
// it returns no families and an error naming the line, never its content.
func Parse(data []byte) ([]Family, error) {
	p := parser{names: map[string]bool{}, series: map[string]bool{}}
	fams, err := p.parse(data)
	if err != nil {
		return nil, err
	}
	return fams, nil
}

type parser struct {
	line   int
	names  map[string]bool // every family name and, for histograms, its sample names
	series map[string]bool // every sample's name and sorted labels
	fams   []Family
	lines  []int // line of each sample of the current family
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("metrics: line %d: %s", p.line, fmt.Sprintf(format, args...))
}

func (p *parser) parse(data []byte) ([]Family, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("metrics: not valid UTF-8")
	}
	if data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("metrics: the last line does not end in a newline")
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	for i := 0; i < len(lines); i++ {
		p.line = i + 1
		ln := lines[i]
		if strings.HasPrefix(ln, "#") {
			if i+1 >= len(lines) {
				return nil, p.errf("HELP without TYPE")
			}
			if err := p.header(ln, lines[i+1]); err != nil {
				return nil, err
			}
			i++
			continue
		}
		if err := p.sample(ln); err != nil {
			return nil, err
		}
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.fams, nil
}

// header reads a family's HELP and TYPE lines.
func (p *parser) header(help, typ string) error {
	if err := p.finish(); err != nil {
		return err
	}
	rest, ok := strings.CutPrefix(help, "# HELP ")
	if !ok {
		return p.errf("a comment that is not HELP followed by TYPE")
	}
	name, text, ok := strings.Cut(rest, " ")
	if !ok || !validMetricName(name) {
		return p.errf("HELP needs a valid metric name and a text")
	}
	f := Family{Name: name}
	var err error
	if f.Help, err = unescape(text, false); err != nil {
		return p.errf("help text: %v", err)
	}
	p.line++
	t, ok := strings.CutPrefix(typ, "# TYPE "+name+" ")
	if !ok {
		return p.errf("TYPE must follow HELP for the same metric")
	}
	switch Type(t) {
	case Counter, Gauge, Histogram:
		f.Type = Type(t)
	default:
		return p.errf("unsupported metric type")
	}
	own := []string{name}
	if f.Type == Histogram {
		own = append(own, name+"_bucket", name+"_sum", name+"_count")
	}
	for _, n := range own {
		if p.names[n] {
			return p.errf("metric name declared twice or clashing with another metric's samples")
		}
		p.names[n] = true
	}
	p.fams = append(p.fams, f)
	p.lines = p.lines[:0]
	return nil
}

// sample reads one sample line into the current family.
func (p *parser) sample(ln string) error {
	if len(p.fams) == 0 {
		return p.errf("a sample before any HELP and TYPE")
	}
	f := &p.fams[len(p.fams)-1]
	i := 0
	for i < len(ln) && ln[i] != '{' && ln[i] != ' ' {
		i++
	}
	s := Sample{Name: ln[:i]}
	if !validMetricName(s.Name) {
		return p.errf("invalid metric name")
	}
	suffix, ok := strings.CutPrefix(s.Name, f.Name)
	switch {
	case !ok:
		return p.errf("a sample of another metric than the one declared above it")
	case f.Type == Histogram && suffix != "_bucket" && suffix != "_sum" && suffix != "_count",
		f.Type != Histogram && suffix != "":
		return p.errf("a sample name that does not fit the metric's type")
	}
	rest := ln[i:]
	if strings.HasPrefix(rest, "{") {
		var err error
		if s.Labels, rest, err = p.labels(rest[1:]); err != nil {
			return err
		}
	}
	text, ok := strings.CutPrefix(rest, " ")
	if !ok {
		return p.errf("a sample needs one space before its value")
	}
	v, ok := parseFloat(text)
	if !ok {
		return p.errf("the value is not a number in canonical form (timestamps are not accepted)")
	}
	s.Value = v
	hasLe := slices.ContainsFunc(s.Labels, func(l Label) bool { return l.Name == "le" })
	if hasLe != (suffix == "_bucket") {
		return p.errf("the le label belongs to histogram buckets, and only there")
	}
	if f.Type == Counter && (math.IsNaN(v) || v < 0) {
		return p.errf("a counter is neither negative nor NaN")
	}
	key := seriesKey(s.Name, s.Labels)
	if p.series[key] {
		return p.errf("a duplicate series")
	}
	p.series[key] = true
	f.Samples = append(f.Samples, s)
	p.lines = append(p.lines, p.line)
	return nil
}

// labels reads label pairs after "{" up to and including "}".
func (p *parser) labels(s string) ([]Label, string, error) {
	var out []Label
	for {
		i := 0
		for i < len(s) && s[i] != '=' {
			i++
		}
		name := s[:i]
		if !validLabelName(name) || strings.HasPrefix(name, "__") {
			return nil, "", p.errf("invalid or reserved label name")
		}
		if slices.ContainsFunc(out, func(l Label) bool { return l.Name == name }) {
			return nil, "", p.errf("a label named twice")
		}
		s, _ = strings.CutPrefix(s[i:], "=")
		if !strings.HasPrefix(s, `"`) {
			return nil, "", p.errf("a label value must be quoted")
		}
		end := closingQuote(s[1:])
		if end < 0 {
			return nil, "", p.errf("an unterminated label value")
		}
		v, err := unescape(s[1:1+end], true)
		if err != nil {
			return nil, "", p.errf("label value: %v", err)
		}
		out = append(out, Label{name, v})
		s = s[end+2:]
		switch {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, "}"):
			return out, s[1:], nil
		default:
			return nil, "", p.errf("labels must be separated by one comma and closed by a brace")
		}
	}
}

// closingQuote returns the index in s of the first unescaped quote, or -1.
func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unescape undoes the format's escapes: \\ and \n, and \" in a label
// value (which closingQuote ended at its first unescaped quote).
func unescape(s string, label bool) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i++; i == len(s) {
			return "", fmt.Errorf("a trailing backslash")
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !label {
				return "", fmt.Errorf("an unknown escape")
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("an unknown escape")
		}
	}
	return b.String(), nil
}

// finish checks the current family once all its samples are read.
func (p *parser) finish() error {
	if len(p.fams) == 0 {
		return nil
	}
	f := p.fams[len(p.fams)-1]
	if f.Type != Histogram {
		return nil
	}
	for i := 0; i < len(f.Samples); {
		var err error
		if i, err = p.histogramSeries(f, i); err != nil {
			return err
		}
	}
	return nil
}

// histogramSeries checks one series of f starting at sample i (its
// buckets, _sum and _count) and returns the index after it.
func (p *parser) histogramSeries(f Family, i int) (int, error) {
	bad := func(j int, what string) (int, error) {
		p.line = p.lines[min(j, len(p.lines)-1)]
		return 0, p.errf("histogram: %s", what)
	}
	s := f.Samples
	base := withoutLe(s[i].Labels)
	key := seriesKey("", base)
	prevLe, prevCount := math.Inf(-1), 0.0
	for {
		if i >= len(s) || s[i].Name != f.Name+"_bucket" || seriesKey("", withoutLe(s[i].Labels)) != key {
			return bad(i, "a series must list its buckets up to le=\"+Inf\", then _sum and _count")
		}
		le, ok := leOf(s[i].Labels)
		if !ok || !(le > prevLe) {
			return bad(i, "bucket bounds must be numbers in strictly increasing order")
		}
		c := s[i].Value
		if !wholeCount(c) || c < prevCount {
			return bad(i, "bucket counts must be whole, cumulative and never decreasing")
		}
		prevLe, prevCount = le, c
		i++
		if math.IsInf(le, 1) {
			break
		}
	}
	if i >= len(s) || s[i].Name != f.Name+"_sum" || seriesKey("", s[i].Labels) != key {
		return bad(i, "the buckets must be followed by the series' _sum")
	}
	i++
	if i >= len(s) || s[i].Name != f.Name+"_count" || seriesKey("", s[i].Labels) != key {
		return bad(i, "the _sum must be followed by the series' _count")
	}
	if s[i].Value != prevCount {
		return bad(i, "_count must equal the +Inf bucket")
	}
	return i + 1, nil
}

func wholeCount(v float64) bool { return v >= 0 && !math.IsInf(v, 1) && v == math.Trunc(v) }

func withoutLe(ls []Label) []Label {
	out := make([]Label, 0, len(ls))
	for _, l := range ls {
		if l.Name != "le" {
			out = append(out, l)
		}
	}
	return out
}

func leOf(ls []Label) (float64, bool) {
	for _, l := range ls {
		if l.Name == "le" {
			v, ok := parseFloat(l.Value)
			return v, ok && !math.IsNaN(v)
		}
	}
	return 0, false
}

// seriesKey identifies a series whatever the order of its labels.
func seriesKey(name string, ls []Label) string {
	sorted := slices.Clone(ls)
	slices.SortFunc(sorted, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	var b bytes.Buffer
	b.WriteString(name)
	for _, l := range sorted {
		b.WriteByte(' ')
		b.WriteString(l.Name)
		b.WriteString(strconv.Quote(l.Value))
	}
	return b.String()
}

// parseFloat reads a value in the canonical form formatFloat writes.
func parseFloat(s string) (float64, bool) {
	switch s {
	case "+Inf":
		return math.Inf(1), true
	case "-Inf":
		return math.Inf(-1), true
	case "NaN":
		return math.NaN(), true
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || formatFloat(v) != s {
		return 0, false
	}
	return v, true
}

func validMetricName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func validLabelName(s string) bool {
	return s != "" && !strings.Contains(s, ":") && validMetricName(s)
}
