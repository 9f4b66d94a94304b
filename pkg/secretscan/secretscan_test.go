package secretscan

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
)

const token = "worker-tok/en+7f3a9c21e0b4=" // printable, with characters URL encoding escapes

func mustSet(t testing.TB, values ...string) *Set {
	t.Helper()
	var bs [][]byte
	for _, v := range values {
		bs = append(bs, []byte(v))
	}
	s, err := New(bs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// encodings returns every written form of v the Set must find, by name
// (URL encodings for printable values only).
func encodings(v []byte) map[string]string {
	out := map[string]string{
		"raw": string(v),
		"hex": hex.EncodeToString(v),
		"HEX": strings.ToUpper(hex.EncodeToString(v)),
	}
	if printable(v) {
		out["query"] = url.QueryEscape(string(v))
		out["path"] = url.PathEscape(string(v))
		out["query-lc"] = lowerEscapes(url.QueryEscape(string(v)))
		out["path-lc"] = lowerEscapes(url.PathEscape(string(v)))
		out["all-%"] = escapeAll(v)
		out["all-%-lc"] = lowerEscapes(escapeAll(v))
	}
	encs := map[string]*base64.Encoding{"std": base64.StdEncoding, "std-raw": base64.RawStdEncoding,
		"url": base64.URLEncoding, "url-raw": base64.RawURLEncoding}
	for name, enc := range encs {
		// The value after 0, 1 and 2 other bytes, with 0, 1 and 2 bytes
		// after it: every alignment, every padding.
		for pre := 0; pre < 3; pre++ {
			for post := 0; post < 3; post++ {
				buf := append(append(bytes.Repeat([]byte{0xfb}, pre), v...), bytes.Repeat([]byte{0xfe}, post)...)
				out[name+"/"+string(rune('0'+pre))+string(rune('0'+post))] = enc.EncodeToString(buf)
			}
		}
	}
	return out
}

func TestEveryEncodingIsFound(t *testing.T) {
	for _, v := range []string{token, "0123456789abcdef", "\x00\x01\xfe\xffbinary-secret-\x80\x90"} {
		s := mustSet(t, v)
		for name, e := range encodings([]byte(v)) {
			for _, doc := range []string{e, "prefix " + e + " suffix", "Authorization: Bearer " + e + "\n"} {
				if !s.Contains([]byte(doc)) {
					t.Errorf("%q: %s form not found in %q", v, name, doc)
				}
			}
		}
	}
}

// TestStraddlingChunks splits each form at every position (and feeds it
// byte by byte): the scanner's state carries over every Write.
func TestStraddlingChunks(t *testing.T) {
	s := mustSet(t, token)
	for name, e := range encodings([]byte(token)) {
		doc := []byte("x" + e + "y")
		for cut := 0; cut <= len(doc); cut++ {
			sc := s.Scanner()
			sc.Write(doc[:cut])
			sc.Write(doc[cut:])
			if !sc.Found() {
				t.Fatalf("%s form split at %d not found", name, cut)
			}
		}
		sc := s.Scanner()
		for i := range doc {
			sc.Write(doc[i : i+1])
		}
		if !sc.Found() {
			t.Fatalf("%s form fed byte by byte not found", name)
		}
		// And through ScanReader with one-byte reads across its chunks.
		big := append(bytes.Repeat([]byte{'a'}, chunkBytes-len(e)/2), doc...)
		if ok, err := s.ScanReader(iotest.OneByteReader(bytes.NewReader(big))); err != nil || !ok {
			t.Fatalf("%s form across a chunk boundary: %v %v", name, ok, err)
		}
		if ok, err := s.ScanReader(bytes.NewReader(big)); err != nil || !ok {
			t.Fatalf("%s form across a chunk boundary (full reads): %v %v", name, ok, err)
		}
	}
}

func TestNoFalseHits(t *testing.T) {
	s := mustSet(t, token, "another-secret-value-0001")
	clean := [][]byte{
		nil, []byte("worker-tok/en+7f3a9c21e0b"), // a prefix is not the value
		[]byte("orker-tok/en+7f3a9c21e0b4="), []byte(strings.Repeat("worker-tok/en+", 1000)),
		[]byte(hex.EncodeToString([]byte(token))[2:]), // hex off by one byte
	}
	for _, c := range clean {
		if s.Contains(c) {
			t.Errorf("false hit in %q", c)
		}
	}
	buf := make([]byte, 1<<20)
	rand.Read(buf)
	if s.Contains(buf) {
		t.Error("false hit in random bytes")
	}
	// A match, then anything: the scanner stays found.
	sc := s.Scanner()
	sc.Write([]byte("xx" + token))
	sc.Write([]byte("clean"))
	if !sc.Found() {
		t.Error("found state lost")
	}
	sc.Reset()
	if sc.Found() {
		t.Error("Reset kept the state")
	}
}

func TestLimits(t *testing.T) {
	_, err := New([]byte("ok-ok-ok-ok-ok-ok"), []byte("fifteen-bytes!!"))
	var e *Error
	if !errors.As(err, &e) || e.Index != 1 || strings.Contains(err.Error(), "fifteen") {
		t.Fatalf("a 15-byte value: %v", err)
	}
	if _, err := New(bytes.Repeat([]byte{'a'}, MinSecretBytes)); err != nil {
		t.Fatalf("a %d-byte value: %v", MinSecretBytes, err)
	}
	if _, err := New(bytes.Repeat([]byte{'a'}, MaxSecretBytes+1)); err == nil {
		t.Fatal("an over-long value was accepted")
	}
	var b Builder
	for range MaxSecrets + 1 {
		b.Add([]byte("a-secret-of-enough-length"))
	}
	if _, err := b.Set(); err == nil {
		t.Fatal("too many values were accepted")
	}
	var none *Set
	if none.Contains([]byte(token)) || none.Len() != 0 {
		t.Fatal("the nil Set found something")
	}
	empty, err := New()
	if err != nil || empty.Contains([]byte(token)) {
		t.Fatalf("the empty Set: %v", err)
	}
}

func TestRSAKey(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var b Builder
	b.AddRSAKey(k)
	s, err := b.Set()
	if err != nil {
		t.Fatal(err)
	}
	der1 := x509.MarshalPKCS1PrivateKey(k)
	der8, _ := x509.MarshalPKCS8PrivateKey(k)
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	for name, doc := range map[string][]byte{
		"pkcs1-pem": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der1}),
		"pkcs8-pem": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der8}),
		"pkcs1-der": der1, "pkcs8-der": der8,
		"jwk-d": []byte(`{"kty":"RSA","d":"` + base64.RawURLEncoding.EncodeToString(k.D.Bytes()) + `"}`),
		"crlf":  bytes.ReplaceAll(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der1}), []byte("\n"), []byte("\r\n")),
	} {
		if !s.Contains(doc) {
			t.Errorf("%s not found", name)
		}
	}
	if s.Contains(pubPEM) || s.Contains(pub) {
		t.Error("the public key was taken for the private one")
	}
	t.Logf("2048-bit key: %d values, table %d KiB", s.Len(), len(s.tab)*4>>10)
}
