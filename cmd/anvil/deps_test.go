package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The anvil binary must not link controller-runtime's test packages: envtest's
// internal/testing/addr creates a folder under the cache or temporary directory in an init
// and panics when it cannot, so on a read-only root filesystem (anvil's Pods) every anvil
// command crashed before main.
func TestBinaryLinksNoTestPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var bad []string
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime/pkg/envtest") ||
			strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime/pkg/internal/testing") {
			bad = append(bad, pkg)
		}
	}
	if len(bad) > 0 {
		t.Errorf("cmd/anvil links controller-runtime's test packages (`go mod why <package>` names an importer):\n%s", strings.Join(bad, "\n"))
	}
}
