package machineplan

import (
	"testing"
	"time"
)

func TestSecretRetry(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		unreadFor time.Duration
		limit     time.Duration
		want      time.Duration
	}{
		{"first failure: the floor", 0, 30 * time.Second, MinSecretRetry},
		{"a moment later: still the floor", 100 * time.Millisecond, 30 * time.Second, MinSecretRetry},
		{"after the floor: as long again", 2 * time.Second, 30 * time.Second, 2 * time.Second},
		{"long unread: the limit", time.Hour, 30 * time.Second, 30 * time.Second},
		{"exactly the limit", 30 * time.Second, 30 * time.Second, 30 * time.Second},
		{"a limit below the floor wins", 0, 200 * time.Millisecond, 200 * time.Millisecond},
		{"no limit, no timed retry (StuckAfter 0)", time.Second, 0, 0},
		{"since in the future (clock step): the floor", -time.Minute, 30 * time.Second, MinSecretRetry},
	} {
		if got := SecretRetry(t0, t0.Add(tc.unreadFor), tc.limit); got != tc.want {
			t.Errorf("%s: SecretRetry after %v, limit %v = %v, want %v", tc.name, tc.unreadFor, tc.limit, got, tc.want)
		}
	}
}

// Following SecretRetry from the first failed read, a Secret that never comes is read a
// handful of times in the first StuckAfter (30 s), and then once per StuckAfter.
func TestSecretRetrySchedule(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC)
	var reads []time.Duration
	for now := t0; now.Sub(t0) < 2*time.Minute; now = now.Add(SecretRetry(t0, now, 30*time.Second)) {
		reads = append(reads, now.Sub(t0))
	}
	want := []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, 62 * time.Second, 92 * time.Second}
	if len(reads) != len(want) {
		t.Fatalf("reads at %v, want %v", reads, want)
	}
	for i := range want {
		if reads[i] != want[i] {
			t.Fatalf("reads at %v, want %v", reads, want)
		}
	}
}
