package egress

import (
	"bytes"
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// MaxHeadBytes bounds a CONNECT request's head (request line and headers).
const MaxHeadBytes = 8 << 10

var (
	errMalformed = errors.New("egress: malformed request")
	errMethod    = errors.New("egress: not a CONNECT request")
)

// parseConnect parses a complete request head (through the blank line):
// "CONNECT host:port HTTP/1.x" and header lines, which are checked for
// shape and otherwise ignored. It returns the host (a DNS name in lower
// case, or an IP address without brackets) and port, errMethod for any
// other method, or errMalformed.
func parseConnect(head []byte) (string, uint16, error) {
	if len(head) > MaxHeadBytes || !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		return "", 0, errMalformed
	}
	lines := strings.Split(string(head[:len(head)-4]), "\r\n")
	for _, l := range lines {
		for i := 0; i < len(l); i++ {
			if c := l[i]; c < 0x20 && c != '\t' || c == 0x7f {
				return "", 0, errMalformed
			}
		}
	}
	for _, h := range lines[1:] {
		name, _, ok := strings.Cut(h, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return "", 0, errMalformed // also an obsolete folded line
		}
	}
	method, rest, ok := strings.Cut(lines[0], " ")
	if !ok {
		return "", 0, errMalformed
	}
	target, version, ok := strings.Cut(rest, " ")
	if !ok || version != "HTTP/1.1" && version != "HTTP/1.0" {
		return "", 0, errMalformed
	}
	if method != "CONNECT" {
		return "", 0, errMethod
	}
	return parseHostPort(target)
}

// parseHostPort parses host:port as a CONNECT target or a network_allow
// entry: a DNS name (letters, digits, hyphens; labels of 1 to 63, 253 in
// all; compared in lower case), an IPv4 address or a bracketed IPv6
// address, and a decimal port from 1 to 65535 without leading zeros.
func parseHostPort(s string) (string, uint16, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, errMalformed
	}
	host, ps := s[:i], s[i+1:]
	if ps == "" || len(ps) > 5 || ps[0] == '0' {
		return "", 0, errMalformed
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return "", 0, errMalformed
	}
	if strings.HasPrefix(host, "[") {
		a, err := netip.ParseAddr(strings.TrimSuffix(host[1:], "]"))
		if err != nil || !strings.HasSuffix(host, "]") || !a.Is6() || a.Zone() != "" {
			return "", 0, errMalformed
		}
		return a.String(), uint16(port), nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return "", 0, errMalformed // IPv6 only in brackets
		}
		return a.String(), uint16(port), nil
	}
	if !validName(host) {
		return "", 0, errMalformed
	}
	return strings.ToLower(host), uint16(port), nil
}

// validName reports whether s is a DNS name of letters, digits and
// hyphens (no trailing dot, no label starting or ending with a hyphen)
// that is not all digits and dots (a malformed IPv4 address).
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	digits := true
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				digits = false
			default:
				return false
			}
		}
	}
	return !digits
}

// ParseAllow checks a network_allow list: at most MaxAllow entries, each
// host:port as parseHostPort takes it, the name in lower case, none twice.
// The error names the entry's index, never its value.
func ParseAllow(entries []string) ([]string, error) {
	if len(entries) > MaxAllow {
		return nil, errors.New("network_allow has more than " + strconv.Itoa(MaxAllow) + " entries")
	}
	out := make([]string, 0, len(entries))
	for i, e := range entries {
		host, port, err := parseHostPort(e)
		if err != nil || strings.ToLower(e) != e {
			return nil, errors.New("network_allow[" + strconv.Itoa(i) + "] is not a lower-case host:port")
		}
		k := key(host, port)
		for _, o := range out {
			if o == k {
				return nil, errors.New("network_allow[" + strconv.Itoa(i) + "] is a duplicate")
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// MaxAllow bounds a network_allow list.
const MaxAllow = 32

// key is the form a host and port are compared in.
func key(host string, port uint16) string {
	return host + "\x00" + strconv.Itoa(int(port))
}
