package mri

import "testing"

func TestNewerResourceVersion(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"10", "9", true},
		{"9", "10", false}, // numerically, not as strings
		{"7", "7", false},
		{"", "7", false}, // unparsable: the incoming object wins
		{"8", "", false},
		{"x1", "0", false},
		{"18446744073709551615", "1", true},
	} {
		if got := NewerResourceVersion(tc.a, tc.b); got != tc.want {
			t.Errorf("NewerResourceVersion(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
