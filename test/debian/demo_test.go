package debian

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/anvil-dev/anvil/internal/dev"
)

// testDemoSamples: what make demo DEBIAN=1 adds holds together without booting more
// guests (the other subtests boot both forms): anvil dev's samples' user data lets in the
// key it keeps in its state folder, and the API server takes config/samples/debian.
func testDemoSamples(t *testing.T, d *debianDev) {
	private, err := os.ReadFile(filepath.Join(d.state, "ssh", "id_ed25519"))
	if err != nil {
		t.Fatalf("anvil dev --debian keeps no login key: %v", err)
	}
	signer, err := ssh.ParsePrivateKey(private)
	if err != nil {
		t.Fatalf("the login key: %v", err)
	}
	authorized := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	userData, err := env.Kubectl(t, d.kubeconfig, "", "get", "secret", dev.DebianUserDataSecret, "-o", `go-template={{index .data "userData" | base64decode}}`)
	if err != nil {
		t.Fatalf("the samples' user data: %v\n%s", err, userData)
	}
	if !strings.HasPrefix(userData, "#cloud-config\n") || !strings.Contains(userData, authorized) || !strings.Contains(userData, "name: anvil") {
		t.Errorf("Secret %s lets in no user anvil with the key in the state folder (%s):\n%s", dev.DebianUserDataSecret, authorized, userData)
	}
	samples := env.Samples(t, "config/samples/debian", d.registryPort)
	if out, err := env.Kubectl(t, d.kubeconfig, "", "apply", "--dry-run=server", "-f", samples); err != nil {
		t.Errorf("the API server refuses config/samples/debian: %v\n%s", err, out)
	}
}
