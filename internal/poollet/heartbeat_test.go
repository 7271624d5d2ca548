package poollet

import (
	"testing"
	"time"
)

// The Lease is renewed before it can lapse, however long the capacity interval.
func TestRenewEveryKeepsTheLeaseAlive(t *testing.T) {
	for _, tc := range []struct{ interval, lease, want time.Duration }{
		{10 * time.Second, 40 * time.Second, 10 * time.Second},
		{time.Hour, 10 * time.Second, 10 * time.Second / 3},
		{30 * time.Second, 40 * time.Second, 40 * time.Second / 3},
		{500 * time.Millisecond, 0, 500 * time.Millisecond},
	} {
		got := renewEvery(tc.interval, tc.lease)
		if got != tc.want {
			t.Errorf("interval %s, lease %s: renewed every %s, want %s", tc.interval, tc.lease, got, tc.want)
		}
		if tc.lease > 0 && got >= tc.lease {
			t.Errorf("interval %s, lease %s: renewed every %s, the Lease lapses in between", tc.interval, tc.lease, got)
		}
	}
}
