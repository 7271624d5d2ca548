package buildagent

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
)

// The OS's initramfs comes first and the agent's archive after it: unpacked as the kernel
// does, the root holds both, the agent executable at its path.
func TestWriteWithAgentAppendsTheAgent(t *testing.T) {
	osDir, root, out := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "os"), []byte("test os"), 0o644); err != nil {
		t.Fatal(err)
	}
	var initramfs bytes.Buffer
	if err := packGzip(&initramfs, root, 0, gzip.BestSpeed); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"kernel": []byte("kernel"), "cmdline": []byte("console=ttyS0\n"), "initramfs": initramfs.Bytes()} {
		if err := os.WriteFile(filepath.Join(osDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agent := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(agent, []byte("#!agent"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeWithAgent(osDir, agent, "/usr/local/bin/some-agent", out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, "initramfs"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Each archive is its own gzip member; gzip.Reader reads them as one stream.
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	unpacked := t.TempDir()
	if err := Unpack(zr, unpacked); err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(filepath.Join(unpacked, "etc", "os")); err != nil || string(raw) != "test os" {
		t.Errorf("the OS's file: %q, %v", raw, err)
	}
	info, err := os.Stat(filepath.Join(unpacked, "usr", "local", "bin", "some-agent"))
	if err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("the agent in the root: %v, %v; want mode 0755", info, err)
	}
	for _, name := range []string{"kernel", "cmdline"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("%s not copied: %v", name, err)
		}
	}
}
