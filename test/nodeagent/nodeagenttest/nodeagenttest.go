// Package nodeagenttest gives tests what a self-registering node needs: anvil-node-agent
// built from this checkout and a workload control plane (etcd, kube-apiserver and
// kube-controller-manager from the assets folder) to register with.
package nodeagenttest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/harness/controlplanes"
)

// BinaryName is the agent's file name, in DIR/ARCH/ as make agents lays out bin/node-agent.
const BinaryName = "anvil-node-agent"

// BuildAgents builds test/nodeagent/cmd/anvil-node-agent of this checkout, static, for each
// GOARCH into DIR/ARCH/anvil-node-agent and returns DIR: the source under test, never a
// stale bin/.
func BuildAgents(t testing.TB, archs ...string) string {
	t.Helper()
	return BuildAgentsIn(t, t.TempDir(), archs...)
}

// BuildAgentsIn is BuildAgents into dir, for what outlives the test that builds it (a rig
// a package's tests share).
func BuildAgentsIn(t testing.TB, dir string, archs ...string) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range archs {
		out := filepath.Join(dir, arch, BinaryName)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./test/nodeagent/cmd/anvil-node-agent")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+arch)
		if raw, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building anvil-node-agent for %s: %v\n%s", arch, err, raw)
		}
	}
	return dir
}

// StartWorkload starts a workload control plane on free loopback ports with w's settings
// (its ControllerManagerPort chosen here), stopped when the test ends. It needs etcd,
// kube-apiserver and kube-controller-manager in the assets folder (make tools).
func StartWorkload(t testing.TB, w controlplane.Workload) *controlplane.ControlPlane {
	t.Helper()
	cp, err := controlplanes.Start(context.Background(), t.TempDir(), &w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the workload control plane: %v", err)
		}
	})
	return cp
}

// WriteCA writes the control plane's CA certificate (what the agent's --ca-file names) into
// the test's folder and returns its path.
func WriteCA(t testing.TB, cp *controlplane.ControlPlane) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, cp.RESTConfig().CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
