package plugin

import (
	"reflect"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// checkDecodeWire requires decodeWire to agree with strictjson.Decode on
// line: the same acceptance and, when accepted, the same values. Lines
// that are not compact never reach decodeWire (DecodeFrame refuses them
// first), so they are skipped here.
func checkDecodeWire(t *testing.T, line []byte) {
	t.Helper()
	if !compact(line) {
		return
	}
	var want wireFrame
	wantErr := strictjson.Decode(line, &want)
	got, err := decodeWire(line)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("decodeWire(%q) error %v, strictjson.Decode error %v", line, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeWire(%q) values differ from strictjson.Decode", line)
	}
}

func TestDecodeWireMatchesStrictjson(t *testing.T) {
	for _, name := range []string{"valid.ndjson", "invalid.ndjson"} {
		for _, line := range corpusLines(t, name) {
			checkDecodeWire(t, line)
		}
	}
	for _, line := range []string{
		`{}`,
		`{"version":"v1","capabilities":[],"limits":{}}`,
		`{"\u0076ersion":"v\u0031","text":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud834\udd1e"}`,
		`{"text":"\ud834"}`,
		`{"text":"\udd1e\ud834"}`,
		`{"sequence":-9223372036854775808,"timeout_ms":9223372036854775807}`,
		`{"sequence":9223372036854775808}`,
		`{"sequence":1.0}`,
		`{"sequence":"1"}`,
		`{"changes":["a",""],"summary":""}`,
		`{"changes":null}`,
		`{"limits":{"frame_bytes":1,"frame_bytes":2}}`,
		`{"text":"x"} `,
		`{"text":"x"}{}`,
		`{"Text":"x"}`,
	} {
		checkDecodeWire(t, []byte(line))
	}
}

func TestExtractFrameRejectsWhatItDoesNotExpect(t *testing.T) {
	// Documents strictjson would refuse never reach extractFrame; if one
	// did, it must be refused rather than half-read.
	for _, line := range []string{``, `[]`, `{"text":1}`, `{"sequence":"x"}`, `{"unknown":"x"}`,
		`{"text":"x"`, `{"text":"x",}`, `{"text":"\x"}`, `{"text":"\u12"}`, `{"capabilities":["a",]}`,
		`{"limits":{"other":1}}`, `{"text":"x"}x`} {
		var w wireFrame
		if extractFrame([]byte(line), &w) {
			t.Errorf("extractFrame accepted %q", line)
		}
	}
}
