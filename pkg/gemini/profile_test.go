package gemini

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

func TestParseProfile(t *testing.T) {
	p, err := ParseProfile([]byte(`{"version":1,"model":"gemini-2.5-pro","provider":"corp-gemini"}`))
	if err != nil || p != (Profile{Model: "gemini-2.5-pro", Provider: "corp-gemini"}) {
		t.Fatalf("%+v, %v", p, err)
	}
	if p, err := ParseProfile([]byte(`{"version":1}`)); err != nil || p != (Profile{}) {
		t.Fatalf("minimal profile: %+v, %v", p, err)
	}
	for name, doc := range map[string]string{
		"no version":        `{"model":"m"}`,
		"version 2":         `{"version":2}`,
		"unknown member":    `{"version":1,"approval_mode":"yolo"}`,
		"key member":        `{"version":1,"api_key_env":"GEMINI_API_KEY"}`,
		"null":              `{"version":1,"model":null}`,
		"duplicate":         `{"version":1,"model":"a","model":"b"}`,
		"model flag":        `{"version":1,"model":"--yolo"}`,
		"model space":       `{"version":1,"model":"a b"}`,
		"provider upper":    `{"version":1,"provider":"Gemini"}`,
		"provider url":      `{"version":1,"provider":"https://generativelanguage.googleapis.com"}`,
		"provider empty":    `{"version":1,"provider":""}`,
		"trailing data":     `{"version":1} {}`,
		"not an object":     `[1]`,
		"canary in a value": `{"version":1,"model":"canary value"}`,
	} {
		_, err := ParseProfile([]byte(doc))
		var pe *agent.ProfileError
		if !errors.As(err, &pe) || strings.Contains(err.Error(), "canary") || !strings.HasPrefix(err.Error(), "gemini profile: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLoadProfile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gemini.json")
	os.WriteFile(p, []byte(`{"version":1,"model":"gemini-2.5-flash"}`), 0o600)
	if got, err := LoadProfile(p); err != nil || got.Model != "gemini-2.5-flash" {
		t.Fatalf("%+v, %v", got, err)
	}
	if _, err := LoadProfile(dir); err == nil {
		t.Fatal("a directory is a profile")
	}
	os.WriteFile(p, []byte(`{"version":1,"model":"`+strings.Repeat("m", agent.MaxProfileBytes)+`"}`), 0o600)
	if _, err := LoadProfile(p); err == nil {
		t.Fatal("an oversized profile was accepted")
	}
}

func FuzzParseProfile(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gemini profile: ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if p.Model != "" && !agent.ValidModel(p.Model) || p.Provider != "" && !agent.ValidProviderID(p.Provider) {
			t.Fatalf("accepted %+v", p)
		}
	})
}
