package devproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Samples copies the sample manifests of folder (relative to the checkout, such as
// config/samples) into a new folder, their images pointed at anvil dev's registry on port
// instead of the default 5001, and returns it for anvil dev's --apply. Subfolders (other
// sets of samples) are left out, as --apply leaves them out.
func (e Env) Samples(t testing.TB, folder, port string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(e.RepoRoot, folder)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		if entry.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, entry.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "127.0.0.1:5001/", "127.0.0.1:"+port+"/"))
		if err := os.WriteFile(filepath.Join(dir, entry.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
