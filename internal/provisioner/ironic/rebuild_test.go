package ironic

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// A rebuild writes a new image and config drive to an active node in place: Ironic takes
// it from active through deploying back to active, never through deleting, cleaning or
// available. Repeated with the same token it does nothing; a new token rebuilds the same
// image again (a new config drive).
func TestRebuild(t *testing.T) {
	irc := shared.Ironic(t)
	p, _ := newProvisioner(t, irc, nil)
	ctx := context.Background()
	const name = "ns~rebuilt"
	if _, err := p.Register(ctx, fakeHost(name)); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, name, provisioner.StateManageable)
	retryBusy(t, "Provide", func() error { return p.Provide(ctx, name) })
	waitState(t, p, name, provisioner.StateAvailable)
	deployment := func(img provisioner.Image, userData, token string) provisioner.Deployment {
		return provisioner.Deployment{Image: img, Token: token, ConfigDrive: &provisioner.ConfigDrive{
			UserData: []byte(userData), MetaData: map[string]any{"uuid": "u"}}}
	}
	first := deployment(testImage, "#cloud-config\n# first\n", "u/1")
	if err := p.Rebuild(ctx, name, first); !errors.Is(err, provisioner.ErrWrongState) {
		t.Errorf("Rebuild of an available node: %v, want ErrWrongState", err)
	}
	retryBusy(t, "Provision", func() error { return p.Provision(ctx, name, first) })
	n := waitState(t, p, name, provisioner.StateActive)
	// The deployment that carried the token out already: nothing to do.
	if err := p.Rebuild(ctx, name, first); err != nil {
		t.Errorf("Rebuild with the token of the deployment the node has: %v", err)
	}

	other := testImage
	other.URL, other.Checksum = "http://127.0.0.1:9/other.raw", "sha256:"+strings.Repeat("cd", 32)
	second := deployment(other, "#cloud-config\n# second\n", "u/2")
	twice(t, "Rebuild to another image", func() error { return untilNotBusy(func() error { return p.Rebuild(ctx, name, second) }) })
	if got := waitState(t, p, name, provisioner.StateActive); got.Image != other {
		t.Errorf("rebuilt node's image = %+v, want %+v", got.Image, other)
	}
	third := deployment(other, "#cloud-config\n# third\n", "u/3")
	retryBusy(t, "Rebuild with a new token", func() error { return p.Rebuild(ctx, name, third) })
	waitState(t, p, name, provisioner.StateActive)

	// What Ironic did, from its own log: two rebuilds, nothing else.
	log, err := os.ReadFile(irc.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	var moves []string
	re := regexp.MustCompile(`Node ` + n.ID + ` moved to provision state "([^"]+)" from state "([^"]+)"`)
	for _, m := range re.FindAllStringSubmatch(string(log), -1) {
		moves = append(moves, m[2]+" -> "+m[1])
	}
	deployed := strings.Index(strings.Join(moves, "\n"), "deploying -> active")
	if deployed < 0 {
		t.Fatalf("Ironic's log shows no deployment of node %s: %v", n.ID, moves)
	}
	after := strings.Split(strings.Join(moves, "\n")[deployed:], "\n")
	want := []string{"deploying -> active", "active -> deploying", "deploying -> active", "active -> deploying", "deploying -> active"}
	if strings.Join(after, ",") != strings.Join(want, ",") {
		t.Errorf("node %s after its deployment moved %v, want %v: two rebuilds in place", n.ID, after, want)
	}

	// Ironic keeps the last rebuild's config drive and token in the node's instance_info.
	info := instanceInfoInDB(t, irc, name)
	cd, _ := info["configdrive"].(map[string]any)
	if cd["user_data"] != "#cloud-config\n# third\n" || info[infoRequest] != "u/3" {
		t.Errorf("instance_info after the rebuilds: configdrive %v, token %v; want the third's", cd, info[infoRequest])
	}
}

// instanceInfoInDB reads node name's instance_info from Ironic's database (its API masks
// the config drive), with the Python Ironic runs on.
func instanceInfoInDB(t *testing.T, irc *ironic.Ironic, name string) map[string]any {
	t.Helper()
	db := filepath.Join(filepath.Dir(irc.LogPath()), "ironic.db")
	const script = `import sqlite3, sys
row = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True).execute(
    "select instance_info from nodes where name = ?", (sys.argv[2],)).fetchone()
print(row[0] if row else "")`
	out, err := exec.Command("python3", "-c", script, db, name).Output()
	if err != nil {
		t.Fatalf("reading Ironic's database with python3 (installed with Ironic): %v", err)
	}
	info := map[string]any{}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("instance_info of node %s in Ironic's database: %v: %q", name, err, out)
	}
	return info
}
