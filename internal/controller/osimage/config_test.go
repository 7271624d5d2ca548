package osimage

import (
	"strings"
	"testing"
	"time"
)

// An OSImage publishes only under its namespace's name on the builders' registry, and
// never into the builder image's folder.
func TestCheckOutput(t *testing.T) {
	c := Config{Registry: "127.0.0.1:5001", BuilderImage: "127.0.0.1:5001/anvil/builder:latest"}
	for _, tc := range []struct {
		namespace, repository, says string
	}{
		{"team-a", "team-a/os", ""},
		{"team-a", "team-a/os/arm", ""},
		{"team-a", "team-b/os", "not under 127.0.0.1:5001/team-a/"},
		{"team-a", "team-a", "not under"},
		{"team-a", "team-ab/os", "not under"},
		{"default", "anvil/builder", "not under"},
		{"anvil", "anvil/builder", "the builder image's folder"},
		{"anvil", "anvil/testos", "the builder image's folder"},
	} {
		err := c.checkOutput(tc.namespace, tc.repository)
		if tc.says == "" && err != nil || tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%s publishing to %s: %v, want %q", tc.namespace, tc.repository, err, tc.says)
		}
	}
}

// A build's push credential outlives every attempt it may run.
func TestBuilderPushExpiry(t *testing.T) {
	now := time.Unix(0, 0)
	if got, want := builderPushExpiry(now, 30*time.Minute, 2), now.Add(24*time.Hour+90*time.Minute); !got.Equal(want) {
		t.Errorf("expiry %v, want %v", got, want)
	}
}
