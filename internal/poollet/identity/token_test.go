package identity

import (
	"testing"
	"time"
)

func TestRenewalIsBeforeExpiry(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		lifetime time.Duration
		want     time.Duration
	}{
		{"an hour's token is replaced after 48 minutes", time.Hour, 48 * time.Minute},
		{"the API server's shortest, ten minutes, after eight", 10 * time.Minute, 8 * time.Minute},
		{"an already expired token at once", 0, 0},
	} {
		if got := renewal(at, at.Add(tc.lifetime)).Sub(at); got != tc.want {
			t.Errorf("%s: renewal after %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"own": ModeOwn, "node": ModeNode, "pool-token": ModePoolToken, "": ModeInvalid, "Node": ModeInvalid, "root": ModeInvalid} {
		got, err := ParseMode(in)
		if got != want || (err == nil) != (want != ModeInvalid) {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
