package github

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func mustKey(tb testing.TB, name string) *rsa.PrivateKey {
	tb.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	k, err := ParsePrivateKey(b)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return k
}

func TestParsePrivateKeyForms(t *testing.T) {
	k1 := mustKey(t, "app-key-pkcs1.pem")
	k8 := mustKey(t, "app-key-pkcs8.pem")
	if !k1.Equal(k8) {
		t.Fatal("PKCS#1 and PKCS#8 forms of one key differ")
	}
	good, _ := os.ReadFile("testdata/app-key-pkcs1.pem")
	ec, _ := os.ReadFile("testdata/ec-key.pem")
	for name, data := range map[string][]byte{
		"empty":         nil,
		"ec key":        ec,
		"two blocks":    append(append([]byte{}, good...), good...),
		"trailing data": append(append([]byte{}, good...), "junk"...),
		"not pem":       []byte("hello"),
		"encrypted":     []byte(strings.Replace(string(good), "-----\n", "-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n", 1)),
		"wrong type":    []byte(strings.ReplaceAll(string(good), "RSA PRIVATE KEY", "CERTIFICATE")),
		"too large":     make([]byte, MaxKeyBytes+1),
	} {
		if k, err := ParsePrivateKey(data); err == nil || k != nil {
			t.Errorf("%s: accepted", name)
		} else if err != ErrKey {
			t.Errorf("%s: error %v, want ErrKey", name, err)
		}
	}
}

// The JWT for a fixed key and instant is fixed (PKCS#1 v1.5 signatures
// are deterministic): its header, integer claims and signature check out.
func TestAppJWTKnownKey(t *testing.T) {
	key := mustKey(t, "app-key-pkcs8.pem")
	now := time.Unix(1_700_000_000, 0)
	tok, err := AppJWT(key, "12345", now)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := AppJWT(key, "12345", now)
	if again != tok {
		t.Fatal("JWT not deterministic for one key and instant")
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("JWT has %d parts", len(parts))
	}
	dec := func(s string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("not base64url: %v", err)
		}
		return b
	}
	if got := string(dec(parts[0])); got != `{"alg":"RS256","typ":"JWT"}` {
		t.Fatalf("header %s", got)
	}
	if got := string(dec(parts[1])); got != `{"iat":1699999940,"exp":1700000540,"iss":12345}` {
		t.Fatalf("claims %s", got)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, sum[:], dec(parts[2])); err != nil {
		t.Fatalf("signature: %v", err)
	}
	var claims map[string]any
	json.Unmarshal(dec(parts[1]), &claims)
	if exp, iat := claims["exp"].(float64), claims["iat"].(float64); exp-iat > 600 || exp-float64(now.Unix()) >= 600 {
		t.Fatalf("exp too far: iat %v exp %v", iat, exp)
	}
	client, err := AppJWT(key, "Iv1.abc123", now)
	if err != nil || !strings.Contains(string(dec(strings.Split(client, ".")[1])), `"iss":"Iv1.abc123"`) {
		t.Fatalf("client id issuer: %v", err)
	}
	for _, bad := range []string{"", "0123", `a"b`, "a b", strings.Repeat("1", 65)} {
		if _, err := AppJWT(key, bad, now); err != ErrAppID {
			t.Errorf("app id %q: %v", bad, err)
		}
	}
}
