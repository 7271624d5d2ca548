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

// A build's push credential outlives every attempt it may run.
func TestBuilderPushExpiry(t *testing.T) {
	now := time.Unix(0, 0)
	if got, want := builderPushExpiry(now, 30*time.Minute, 2), now.Add(24*time.Hour+90*time.Minute); !got.Equal(want) {
		t.Errorf("expiry %v, want %v", got, want)
	}
}
