package secretscan

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
)

// pemLine is the number of base64 characters of a PEM body line.
const pemLine = 64

// RSAKeyValues returns the values that identify k's private part: nums,
// the private exponent and the primes (big-endian bytes), and lines, every PEM body
// line of its PKCS#1 and PKCS#8 encodings whose bytes lie wholly at or
// after the private exponent (a line holding a public part — the
// modulus, the exponent — could appear in a public key file too). A leak
// of the key file, of its DER, hex or base64, or of a JWK is found
// through them.
func RSAKeyValues(k *rsa.PrivateKey) (nums, lines [][]byte) {
	if k == nil || k.D == nil {
		return nil, nil
	}
	d := k.D.Bytes()
	nums = [][]byte{d}
	for _, p := range k.Primes {
		if b := p.Bytes(); len(b) >= MinSecretBytes && len(b) <= MaxSecretBytes {
			nums = append(nums, b)
		}
	}
	der1 := x509.MarshalPKCS1PrivateKey(k)
	ders := [][]byte{der1}
	if der8, err := x509.MarshalPKCS8PrivateKey(k); err == nil {
		ders = append(ders, der8)
	}
	for _, der := range ders {
		at := bytes.Index(der, d)
		if at < 0 {
			continue
		}
		body := base64.StdEncoding.EncodeToString(der)
		// Line i covers bytes [48i, 48i+48); the last may be shorter.
		for i := 0; i*pemLine < len(body); i++ {
			if i*pemLine/4*3 < at {
				continue
			}
			line := body[i*pemLine : min((i+1)*pemLine, len(body))]
			if len(line) >= MinSecretBytes {
				lines = append(lines, []byte(line))
			}
		}
	}
	return nums, lines
}
