package ironic

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// What Ironic writes into http_root is what a BMC downloads; nothing can be written back.
func TestBootFilesServesHTTPRootReadOnly(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "redfish"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "redfish", "boot-x.iso"), []byte("iso bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	var port int
	if err := pickPorts("127.0.0.1", &port); err != nil {
		t.Fatal(err)
	}
	b, err := serveBootFiles("127.0.0.1", port, root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	resp, err := http.Get(base + "/redfish/boot-x.iso")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "iso bytes" {
		t.Errorf("GET the ISO: %s %q", resp.Status, body)
	}
	req, _ := http.NewRequest(http.MethodPut, base+"/redfish/boot-x.iso", strings.NewReader("evil"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %s, want 405", resp.Status)
	}
	if resp, err := http.Get(base + "/../ironic.conf"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("a path above http_root was served")
		}
	}
}
