package imageowner

import (
	"strings"
	"testing"
)

var folders = Folders{Registry: "127.0.0.1:5001", Shared: []string{"anvil", "infra/os/"}}

// Which repositories a namespace may read: its own folder and the shared ones, never
// another namespace's (nor one whose name only starts like its own).
func TestUse(t *testing.T) {
	for _, tc := range []struct {
		namespace, repository string
		ok                    bool
	}{
		{"team-a", "team-a/os", true},
		{"team-a", "team-a/os/arm", true},
		{"mallory", "anvil/testos", true},
		{"mallory", "anvil/builder", true},
		{"mallory", "infra/os/ubuntu", true},
		{"mallory", "default/built-os", false},
		{"mallory", "mallory2/os", false},
		{"team", "team-a/os", false},
		{"mallory", "mallory", false},
		{"mallory", "infra/other", false},
		{"mallory", "anvilx/os", false},
		{"", "anvil-free/os", false},
		{"", "/os", false},
	} {
		err := folders.Use(tc.namespace, tc.repository)
		if tc.ok != (err == nil) {
			t.Errorf("%s reading %s: %v, want allowed %v", tc.namespace, tc.repository, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "push the image under 127.0.0.1:5001/"+tc.namespace+"/") {
			t.Errorf("%s reading %s: %q does not say what to do", tc.namespace, tc.repository, err)
		}
	}
}

// A refusal names the namespace's own folder and the shared ones, not whose the image is.
func TestUseMessage(t *testing.T) {
	err := folders.Use("mallory", "default/built-os")
	want := "127.0.0.1:5001/default/built-os is neither under 127.0.0.1:5001/mallory/ (namespace mallory's folder) nor under a shared folder (127.0.0.1:5001/anvil/, 127.0.0.1:5001/infra/os/): push the image under 127.0.0.1:5001/mallory/, or ask an admin to share its folder"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if err := (Folders{Registry: "r:1"}).Use("a", "b/c"); err == nil || !strings.Contains(err.Error(), "(no folder is shared)") {
		t.Errorf("without shared folders: %v", err)
	}
}

// An OSImage publishes only under its namespace's name, and never into a shared folder,
// even when a namespace has the shared folder's name.
func TestPublish(t *testing.T) {
	for _, tc := range []struct {
		namespace, repository, says string
	}{
		{"team-a", "team-a/os", ""},
		{"team-a", "team-a/os/arm", ""},
		{"team-a", "team-b/os", "not under 127.0.0.1:5001/team-a/"},
		{"team-a", "team-a", "not under"},
		{"team-a", "team-ab/os", "not under"},
		{"default", "anvil/builder", "not under"},
		{"anvil", "anvil/builder", "a shared folder"},
		{"anvil", "anvil/testos", "a shared folder"},
		{"infra", "infra/os/ubuntu", "127.0.0.1:5001/infra/os/, a shared folder"},
		{"infra", "infra/tools", ""},
	} {
		err := folders.Publish(tc.namespace, tc.repository)
		if tc.says == "" && err != nil || tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%s publishing to %s: %v, want %q", tc.namespace, tc.repository, err, tc.says)
		}
	}
}

// Images on other registries are not this rule's; references are parsed, tags and
// digests alike.
func TestUseImage(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		reference string
		ok        bool
	}{
		{"127.0.0.1:5001/mallory/os:latest", true},
		{"127.0.0.1:5001/anvil/testos" + digest, true},
		{"127.0.0.1:5001/default/built-os:latest", false},
		{"127.0.0.1:5001/default/built-os" + digest, false},
		{"127.0.0.1:5001/default/built-os:1" + digest, false},
		{"registry.example/default/built-os:latest", true},
		{"127.0.0.1:5002/default/built-os:latest", true},
	} {
		if err := folders.UseImage("mallory", tc.reference); tc.ok != (err == nil) {
			t.Errorf("mallory booting %s: %v, want allowed %v", tc.reference, err, tc.ok)
		}
	}
}

func TestParseFolder(t *testing.T) {
	for in, want := range map[string]string{"anvil": "anvil", "infra/os/": "infra/os", "/shared": "shared", "": "", "/": "", "UP": "", "a//b": "", "a b": ""} {
		got, err := ParseFolder(in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("ParseFolder(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
