package osimage

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The folders an OSImage is held to: anvil/, the builder image's folder and the admin's
// shared folders are read by all and written by none; the rule itself is
// internal/imageowner's (TestUse, TestPublish).
func TestFolders(t *testing.T) {
	c := Config{Registry: "127.0.0.1:5001", BuilderImage: "127.0.0.1:5001/tools/builder:latest", SharedFolders: []string{"infra/os"}}
	f := c.folders()
	if f.Registry != "127.0.0.1:5001" || !slices.Equal(f.Shared, []string{"anvil", "infra/os", "tools"}) {
		t.Errorf("folders %+v", f)
	}
	if err := f.Publish("tools", "tools/mine"); err == nil || !strings.Contains(err.Error(), "a shared folder") {
		t.Errorf("namespace tools publishing into the builder image's folder: %v", err)
	}
	if err := f.Use("team-a", "infra/os/ubuntu"); err != nil {
		t.Errorf("a base in a shared folder: %v", err)
	}
}

// A build's push credential outlives every attempt it may run, up to 48 h: a timeout of
// years (before the API's cap, or past it) gave a credential of years.
func TestBuilderPushExpiry(t *testing.T) {
	now := time.Unix(0, 0)
	for _, tc := range []struct {
		timeout time.Duration
		retries int32
		want    time.Duration
	}{
		{30 * time.Minute, 2, 24*time.Hour + 90*time.Minute},
		{6 * time.Hour, 3, 48 * time.Hour},
		{6 * time.Hour, 10, 48 * time.Hour},
		{1000 * time.Hour, 1, 48 * time.Hour},
		{time.Duration(1<<63 - 1), 10, 48 * time.Hour},
		{time.Hour << 20, 1 << 30, 48 * time.Hour},
		{12 * time.Hour, 1, 48 * time.Hour},
		{11 * time.Hour, 1, 46 * time.Hour},
		{0, 0, 24 * time.Hour},
		{-time.Hour, 1, 0},
		{time.Hour, -5, 0},
	} {
		if got := builderPushExpiry(now, tc.timeout, tc.retries); !got.Equal(now.Add(tc.want)) {
			t.Errorf("timeout %v, retries %d: expires after %v, want %v", tc.timeout, tc.retries, got.Sub(now), tc.want)
		}
	}
}
