package firstboot

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidateIgnition(t *testing.T) {
	many := make([]string, 5000)
	for i := range many {
		many[i] = fmt.Sprintf(`{"path":"relative-%d"}`, i)
	}
	for _, tc := range []struct {
		name, config string
		want         []string // nil: valid
	}{
		{"valid", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,vm"}}]}}`, nil},
		{"warning only", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","mode":420}]},"unknown":1}`, nil},
		{"empty", ``, []string{"not a config (empty)"}},
		{"old version", `{"ignition":{"version":"2.2.0"}}`, []string{"unsupported config version"}},
		{"relative path", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"relative"}]}}`,
			[]string{"config is not valid", "$.storage.files.0.path", "path not absolute"}},
		// A tenant's Secret of thousands of errors gives a message a condition can hold.
		{"thousands of errors", `{"ignition":{"version":"3.4.0"},"storage":{"files":[` + strings.Join(many, ",") + `]}}`,
			[]string{"$.storage.files.9.path", "and 4990 more errors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateIgnition([]byte(tc.config))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
			if len(err.Error()) > MaxMessage || strings.Contains(err.Error(), "files.10.path") {
				t.Errorf("message of %d bytes lists more than %d errors", len(err.Error()), maxEntries)
			}
		})
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 10, "0123456789"},
		{"0123456789a", 10, "0123456..."},
		{"ääääää", 8, "ää..."}, // never half a rune
	} {
		if got := clip(tc.s, tc.n); got != tc.want || !utf8.ValidString(got) || len(got) > tc.n {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
