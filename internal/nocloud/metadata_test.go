package nocloud

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"
)

func parse(t interface {
	Helper()
	Fatalf(string, ...any)
}, raw []byte) map[string]string {
	t.Helper()
	got := map[string]string{}
	if err := yaml.UnmarshalStrict(raw, &got); err != nil {
		t.Fatalf("meta-data is not YAML of strings: %v\n%s", err, raw)
	}
	return got
}

// A value (or, were the caller's check bypassed, a key) holding a line break, a colon, a
// quote, a comment sign or characters YAML parsers refuse raw stays one value: nothing it
// holds adds a key or changes instance-id or local-hostname.
func TestMetaDataValuesCannotInjectKeys(t *testing.T) {
	extra := map[string]string{
		"newline":   "x\ninstance-id: evil",
		"crlf":      "x\r\nlocal-hostname: evil",
		"colon":     "a: b",
		"flow":      "{instance-id: evil}",
		"quote":     `a" , "instance-id": "evil`,
		"backslash": `\" \u0041 \`,
		"comment":   "v # not a comment",
		"empty":     "",
		"bool":      "yes",
		"number":    "0x10",
		"anchor":    "&a *a !!binary",
		"c1-nel":    "a\u0085b\u0080c",
		"nonchars":  "\ufffe\uffff\u2028\ufeff",
		"astral":    "😀",
		"nul-tab":   "a\x00b\tc\x7f",
		"a\nb: c":   "key with a line break",
	}
	raw := MetaData("i-1", "vm-1", extra)
	got := parse(t, raw)
	want := map[string]string{"instance-id": "i-1", "local-hostname": "vm-1"}
	for k, v := range extra {
		want[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %q = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("meta-data has %d keys, want %d:\n%s", len(got), len(want), raw)
	}
	if strings.Count(string(raw), "\n") != len(want) {
		t.Errorf("meta-data is not one line a key:\n%s", raw)
	}
	for _, c := range raw {
		if c != '\n' && (c < ' ' || c > '~') {
			t.Fatalf("meta-data holds byte %#x outside printable ASCII:\n%q", c, raw)
		}
	}
}

func TestMetaDataLayout(t *testing.T) {
	got := string(MetaData("i-1", "vm-1", map[string]string{"b": "2", "a": "1"}))
	want := "instance-id: \"i-1\"\nlocal-hostname: \"vm-1\"\n\"a\": \"1\"\n\"b\": \"2\"\n"
	if got != want {
		t.Errorf("meta-data\n%s\nwant\n%s", got, want)
	}
}

// Any string round-trips through Quote and a YAML parser; invalid UTF-8 comes back with
// U+FFFD for each bad byte, as Go reads it.
func TestQuoteRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		if rapid.Bool().Draw(t, "raw bytes") {
			s = string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes"))
		}
		var want strings.Builder
		for _, r := range s {
			want.WriteRune(r)
		}
		if got := parse(t, MetaData("i", "h", map[string]string{"k": s}))["k"]; got != want.String() {
			t.Fatalf("Quote(%q) parsed as %q", s, got)
		}
	})
}
