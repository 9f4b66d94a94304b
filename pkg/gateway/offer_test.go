package gateway

import (
	"slices"
	"strings"
	"testing"
)

// TestOffer: the gateway offers every provider's id and kind, sorted, and
// nothing of its upstream or key; the offer parses back to the same.
func TestOffer(t *testing.T) {
	ps, err := ParseProviders([]FileProvider{
		{ID: "openai", Kind: "openai-responses", BaseURL: "https://api.openai.com/v1", KeyEnv: "OPENAI_KEY"},
		{ID: "anthropic", Kind: "anthropic-messages", BaseURL: "https://api.anthropic.com", KeyEnv: "ANTHROPIC_KEY"},
	})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(ps, []string{"sk-openai-0123456789", "sk-anthropic-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	offer := g.Offer()
	if offer != "anthropic=anthropic-messages,openai=openai-responses" {
		t.Fatalf("offer %q", offer)
	}
	if gr := g.Issue(Budget{}); gr.Offer() != offer {
		t.Fatalf("grant offer %q", gr.Offer())
	}
	got, err := ParseOffer(offer)
	want := []Offered{{"anthropic", KindAnthropicMessages}, {"openai", KindOpenAIResponses}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseOffer: %v, %v", got, err)
	}
}

func TestParseOfferRefuses(t *testing.T) {
	long := strings.Repeat("a", maxProviderIDSize+1)
	many := strings.Repeat("p=openai-responses,", MaxProviders) + "q=openai-responses"
	for _, s := range []string{
		"", "openai", "openai=", "=openai-responses", "openai=openai-chat",
		"Openai=openai-responses", "a=openai-responses,a=anthropic-messages",
		"a=openai-responses,", ",a=openai-responses", "a=openai-responses;b=anthropic-messages",
		long + "=openai-responses", many, "a=openai-responses=x", "a =openai-responses",
	} {
		if got, err := ParseOffer(s); err == nil || got != nil {
			t.Errorf("ParseOffer(%q) = %v, %v", s, got, err)
		} else if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q names the offer", err)
		}
	}
}

// FuzzParseOffer: never panics; an accepted offer has unique safe ids and
// known kinds and formats back to itself once sorted.
func FuzzParseOffer(f *testing.F) {
	f.Add("openai=openai-responses")
	f.Add("anthropic=anthropic-messages,g.1=gemini-generate-content,openai=openai-responses")
	f.Add("a=openai-responses,a=openai-responses")
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseOffer(s)
		if err != nil {
			if ps != nil {
				t.Fatal("values with an error")
			}
			return
		}
		if len(ps) == 0 || len(ps) > MaxProviders {
			t.Fatalf("%d providers", len(ps))
		}
		ids := map[string]bool{}
		for _, p := range ps {
			if ids[p.ID] || !knownKind(p.Kind) || strings.ContainsAny(p.ID, "=,") {
				t.Fatalf("accepted %q", s)
			}
			ids[p.ID] = true
		}
		again, err := ParseOffer(FormatOffer(ps))
		if err != nil || len(again) != len(ps) {
			t.Fatalf("round trip of %q: %v", s, err)
		}
	})
}
