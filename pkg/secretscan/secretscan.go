package secretscan

import (
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// Limits of a Set.
const (
	MinSecretBytes = 16   // shortest value a Set accepts
	MaxSecretBytes = 4096 // longest value a Set accepts
	MaxSecrets     = 256  // values per Set
	// maxTableBytes bounds the automaton's table (states × byte classes
	// × 4 bytes).
	maxTableBytes = 64 << 20
	// chunkBytes is the read size of ScanReader.
	chunkBytes = 64 << 10
)

// Error is a refused value: it names the value's index, never the value.
type Error struct {
	Index  int
	Reason string
}

func (e *Error) Error() string {
	if e.Index < 0 {
		return "secretscan: " + e.Reason
	}
	return "secretscan: value " + strconv.Itoa(e.Index) + ": " + e.Reason
}

// Set is an immutable set of secret values ready to scan for. The zero
// or nil Set holds none and finds nothing. A Set is safe for concurrent
// use; each stream needs its own Scanner.
type Set struct {
	n     int        // values
	class [256]uint8 // byte → class
	k     int32      // classes
	tab   []int32    // premultiplied state × k + class → next premultiplied state
	hit   int32      // the absorbing state every match leads to
}

// Builder collects values for a Set. Errors name the value's position
// among those added, never the value.
type Builder struct {
	n    int
	pats [][]byte
	seen map[string]bool
	err  error
}

// Add adds v, to be found in every form Forms lists.
func (b *Builder) Add(v []byte) { b.add(v, Forms) }

// AddLiteral adds v, to be found only as it is (a PEM line of a key,
// which is itself an encoding).
func (b *Builder) AddLiteral(v []byte) {
	b.add(v, func(v []byte) [][]byte { return [][]byte{v} })
}

// AddRSAKey adds the values of RSAKeyValues(k): the key's numbers in
// every form, its PEM lines as they are.
func (b *Builder) AddRSAKey(k *rsa.PrivateKey) {
	nums, lines := RSAKeyValues(k)
	for _, v := range nums {
		b.Add(v)
	}
	for _, v := range lines {
		b.AddLiteral(v)
	}
}

func (b *Builder) add(v []byte, forms func([]byte) [][]byte) {
	i := b.n
	b.n++
	switch {
	case b.err != nil:
		return
	case b.n > MaxSecrets:
		b.err = &Error{Index: -1, Reason: "more than " + strconv.Itoa(MaxSecrets) + " values"}
		return
	case len(v) < MinSecretBytes:
		b.err = &Error{Index: i, Reason: "shorter than " + strconv.Itoa(MinSecretBytes) + " bytes"}
		return
	case len(v) > MaxSecretBytes:
		b.err = &Error{Index: i, Reason: "longer than " + strconv.Itoa(MaxSecretBytes) + " bytes"}
		return
	}
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	for _, p := range forms(v) {
		if !b.seen[string(p)] {
			b.seen[string(p)] = true
			b.pats = append(b.pats, p)
		}
	}
}

// Set builds the Set of everything added, or returns the first refusal:
// a value outside MinSecretBytes..MaxSecretBytes, more than MaxSecrets
// values, or a table past its bound.
func (b *Builder) Set() (*Set, error) {
	if b.err != nil {
		return nil, b.err
	}
	s, err := build(b.pats)
	if err != nil {
		return nil, err
	}
	s.n = b.n
	return s, nil
}

// New builds the Set of values in every form (Builder.Add).
func New(values ...[]byte) (*Set, error) {
	var b Builder
	for _, v := range values {
		b.Add(v)
	}
	return b.Set()
}

// Len is the number of values the Set was built from.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Forms returns the patterns New looks for to find v: v itself, its hex
// (both cases), its base64 cores (both alphabets, three alignments) and,
// for printable ASCII, its URL encodings.
func Forms(v []byte) [][]byte {
	out := [][]byte{v}
	h := hex.EncodeToString(v)
	out = append(out, []byte(h), []byte(strings.ToUpper(h)))
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for a := 0; a < 3; a++ {
			out = append(out, []byte(base64Core(enc, v, a)))
		}
	}
	if printable(v) {
		s := string(v)
		for _, e := range []string{url.QueryEscape(s), url.PathEscape(s), escapeAll(v)} {
			out = append(out, []byte(e), []byte(lowerEscapes(e)))
		}
	}
	return out
}

// base64Core is the part of the encoding of v, placed a bytes into an
// encoded stream, that depends on v's bytes alone: characters covering
// bits [6j, 6j+6) with 8a ≤ 6j and 6j+6 ≤ 8(a+len(v)).
func base64Core(enc *base64.Encoding, v []byte, a int) string {
	buf := make([]byte, a+len(v))
	copy(buf[a:], v)
	full := enc.EncodeToString(buf)
	return full[(8*a+5)/6 : 8*(a+len(v))/6]
}

func printable(v []byte) bool {
	for _, b := range v {
		if b < 0x21 || b > 0x7e {
			return false
		}
	}
	return true
}

// escapeAll percent-encodes every byte of v (upper-case hex).
func escapeAll(v []byte) string {
	const digits = "0123456789ABCDEF"
	var b strings.Builder
	for _, c := range v {
		b.WriteByte('%')
		b.WriteByte(digits[c>>4])
		b.WriteByte(digits[c&15])
	}
	return b.String()
}

// lowerEscapes lower-cases the hex digits of every %XX in e.
func lowerEscapes(e string) string {
	b := []byte(e)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lowerHex(b[i+1]), lowerHex(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func lowerHex(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// build makes the dense Aho-Corasick automaton of pats over byte classes.
// Every state that completes a pattern is replaced by one absorbing hit
// state: a stream's first match is all a caller learns.
func build(pats [][]byte) (*Set, error) {
	s := &Set{}
	// Classes: one per byte some pattern uses, one for all other bytes.
	var used [256]bool
	for _, p := range pats {
		for _, b := range p {
			used[b] = true
		}
	}
	k := 0
	for b := range 256 {
		if used[b] {
			s.class[b] = uint8(k)
			k++
		}
	}
	if k < 256 {
		for b := range 256 {
			if !used[b] {
				s.class[b] = uint8(k)
			}
		}
		k++
	}
	// The trie: state 0 is the root, state 1 the hit state.
	type node struct {
		next map[uint8]int32
		end  bool
	}
	nodes := []node{{next: map[uint8]int32{}}, {}}
	for _, p := range pats {
		cur := int32(0)
		for _, b := range p {
			c := s.class[b]
			nx, ok := nodes[cur].next[c]
			if !ok {
				nx = int32(len(nodes))
				nodes = append(nodes, node{next: map[uint8]int32{}})
				nodes[cur].next[c] = nx
			}
			cur = nx
		}
		nodes[cur].end = true
	}
	if int64(len(nodes))*int64(k)*4 > maxTableBytes {
		return nil, &Error{Index: -1, Reason: "the values need too large a table"}
	}
	s.k = int32(k)
	s.hit = 1 * s.k
	s.tab = make([]int32, len(nodes)*k)
	for c := range k {
		s.tab[int(s.hit)+c] = s.hit
	}
	// Breadth first: a state's failure link is decided before its
	// children's, and its row is its failure state's row overridden by
	// its own edges.
	fail := make([]int32, len(nodes))
	queue := make([]int32, 0, len(nodes))
	for c := range k {
		nx, ok := nodes[0].next[uint8(c)]
		switch {
		case !ok:
			s.tab[c] = 0
		case nodes[nx].end:
			s.tab[c] = s.hit
		default:
			s.tab[c] = nx * s.k
			fail[nx] = 0
			queue = append(queue, nx)
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		row, frow := int(st*s.k), int(fail[st]*s.k)
		copy(s.tab[row:row+k], s.tab[frow:frow+k])
		for c, nx := range nodes[st].next {
			// The failure state of nx is where the failure state of st
			// goes on c (already final in its row).
			f := s.tab[frow+int(c)]
			if nodes[nx].end || f == s.hit {
				s.tab[row+int(c)] = s.hit
				continue
			}
			fail[nx] = f / s.k
			s.tab[row+int(c)] = nx * s.k
			queue = append(queue, nx)
		}
	}
	return s, nil
}

// Contains reports whether b holds any value of s in any of its forms.
func (s *Set) Contains(b []byte) bool {
	sc := s.Scanner()
	sc.Write(b)
	return sc.Found()
}

// ScanReader reads r to its end in bounded chunks and reports whether it
// held a value; it stops reading at the first match.
func (s *Set) ScanReader(r io.Reader) (bool, error) {
	sc := s.Scanner()
	buf := make([]byte, chunkBytes)
	for {
		n, err := r.Read(buf)
		sc.Write(buf[:n])
		if sc.Found() {
			return true, nil
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// Scanner is the state of one stream's scan. Write feeds it; Found says
// whether any value has been seen so far, across Write boundaries.
type Scanner struct {
	s     *Set
	state int32
}

// Scanner returns a fresh scanner of s (nil s: one that finds nothing).
func (s *Set) Scanner() *Scanner { return &Scanner{s: s} }

// Write implements io.Writer; it never fails.
func (sc *Scanner) Write(p []byte) (int, error) {
	s := sc.s
	if s == nil || len(s.tab) == 0 || sc.state == s.hit {
		return len(p), nil
	}
	st, tab, cls := sc.state, s.tab, &s.class
	for _, b := range p {
		st = tab[st+int32(cls[b])]
	}
	sc.state = st
	return len(p), nil
}

// Found reports whether the stream so far held a value.
func (sc *Scanner) Found() bool { return sc.s != nil && len(sc.s.tab) > 0 && sc.state == sc.s.hit }

// Reset starts a new stream.
func (sc *Scanner) Reset() { sc.state = 0 }
