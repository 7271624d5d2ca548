package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// ClusterctlRepository lays out clusterctl's local repository of anvil's provider in a
// folder of the test's, as make clusterctl-repo does (config/capi rendered by kubectl
// kustomize, config/clusterctl's metadata, cluster template and flavors), and returns the path of
// the clusterctl.yaml that names it.
func ClusterctlRepository(t testing.TB, kubectl string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	dir := filepath.Join(base, "infrastructure-anvil", "v0.1.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	components, err := exec.Command(kubectl, "kustomize", filepath.Join(root, "config", "capi")).Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("kubectl kustomize config/capi: %v\n%s", err, stderr)
	}
	files := map[string][]byte{"infrastructure-components.yaml": components}
	for _, name := range []string{"metadata.yaml", "cluster-template.yaml"} {
		if files[name], err = os.ReadFile(filepath.Join(root, "config", "clusterctl", name)); err != nil {
			t.Fatal(err)
		}
	}
	// Each flavor is the default template and the flavor's objects (config/clusterctl/flavors).
	flavors, err := filepath.Glob(filepath.Join(root, "config", "clusterctl", "flavors", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range flavors {
		extra, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := "cluster-template-" + filepath.Base(f)
		files[name] = append(append(slices.Clone(files["cluster-template.yaml"]), "---\n"...), extra...)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(base, "clusterctl.yaml")
	if err := os.WriteFile(cfg, []byte("providers:\n- name: anvil\n  type: InfrastructureProvider\n  url: file://"+
		filepath.Join(dir, "infrastructure-components.yaml")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}
