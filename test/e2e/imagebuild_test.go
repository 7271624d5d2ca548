package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/anvil-dev/anvil/test/testos"
)

// agentsDir is bin/build-agent, failing the test when an architecture's agent is missing.
func agentsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repoRoot, "bin", "build-agent")
	for _, arch := range testos.Architectures {
		if _, err := os.Stat(filepath.Join(dir, string(arch), "anvil-build-agent")); err != nil {
			t.Fatalf("the build agent for %s is missing (%v): run make agents", arch, err)
		}
	}
	return dir
}

const buildObjects = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata:
  name: e2e-builder
capabilities:
  cpu: "1"
  memory: 1Gi
---
apiVersion: images.anvil.dev/v1alpha1
kind: OSImage
metadata:
  name: e2e-os
  namespace: default
spec:
  base: REGISTRY/anvil/testos:latest
  architectures: [arm64, amd64]
  containerfiles:
    - content: |
        ARG TARGETARCH
        LABEL dev.anvil.arch=$TARGETARCH
        RUN mkdir -p /etc/anvil && echo "built-on=$(uname -m)" > /etc/anvil/build
  output: {repository: REGISTRY/e2e/os, tag: "1"}
  builder:
    machineClassRef: {name: e2e-builder}
    allowEmulated: true
    timeout: 15m
`

const builtMachines = `
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: built-amd64, namespace: default}
spec: {machineClassRef: {name: e2e-builder}, architecture: amd64, image: REGISTRY/e2e/os:1}
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: built-arm64, namespace: default}
spec: {machineClassRef: {name: e2e-builder}, architecture: arm64, image: REGISTRY/e2e/os:1}
`

// One recipe, built natively for amd64 and arm64 on builder Machines of each architecture
// (QEMU pools of anvil dev), published as one index; a Machine of each architecture boots
// the result and prints where its image was built.
func TestImageBuildPublishesOneIndexEachArchitectureBuiltOnItsOwn(t *testing.T) {
	state := shortDir(t)
	t.Cleanup(func() {
		for _, pid := range qemuProcesses(t, state) {
			if n, err := strconv.Atoi(pid); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	registry := "127.0.0.1:" + freePort(t)
	_, port, _ := strings.Cut(registry, ":")
	d := startDev(t, "--state-dir", state, "--bin-dir", binDir,
		"--apiserver-port", freePort(t), "--etcd-port", freePort(t), "--etcd-peer-port", freePort(t),
		"--registry-port", port, "--qemu-pools=true", "--metal-pool=false", "--fake-pool=",
		"--test-os", testos.Dir(t), "--agents", agentsDir(t))
	kubeconfig := filepath.Join(state, "kubeconfig")
	if out, err := kubectl(t, kubeconfig, strings.ReplaceAll(buildObjects, "REGISTRY", registry), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	waitKubectlFor(t, kubeconfig, 20*time.Minute, "the OSImage Ready", func(s string) bool { return s == "True" },
		"get", "osimage", "e2e-os", "-n", "default", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)

	// Each architecture was built once, by its own builder, and the builders are gone.
	out, err := kubectl(t, kubeconfig, "", "get", "osimagebuilds", "-n", "default", "-o",
		`jsonpath={range .items[*].status.architectures[*]}{.architecture}={.phase}/{.attempts} {end}`)
	if err != nil || strings.TrimSpace(out) != "amd64=Succeeded/1 arm64=Succeeded/1" {
		t.Errorf("builds: %q, %v; want each architecture Succeeded in one attempt", out, err)
	}
	waitKubectlFor(t, kubeconfig, 2*time.Minute, "builders deleted", func(s string) bool { return strings.TrimSpace(s) == "" },
		"get", "machines", "-n", "default", "-l", "images.anvil.dev/osimage=e2e-os", "-o", "name")

	// The published tag is an OCI index with one entry per platform.
	ref, err := name.ParseReference(registry+"/e2e/os:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref, remote.WithContext(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, e := range m.Manifests {
		platforms = append(platforms, e.Platform.OS+"/"+e.Platform.Architecture)
	}
	if strings.Join(platforms, " ") != "linux/amd64 linux/arm64" || m.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("index %s with %v, want an OCI index of linux/amd64 and linux/arm64", m.MediaType, platforms)
	}

	// Machines of both architectures boot the output and say where it was built.
	if out, err := kubectl(t, kubeconfig, strings.ReplaceAll(builtMachines, "REGISTRY", registry), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	for arch, want := range map[string]string{"amd64": "built-on=x86_64", "arm64": "built-on=aarch64"} {
		machine := "built-" + arch
		waitKubectl(t, kubeconfig, "Running", "get", "machine", machine, "-n", "default", "-o", "jsonpath={.status.state}")
		console, err := kubectl(t, kubeconfig, "", "get", "machine", machine, "-n", "default", "-o", "jsonpath={.status.console}")
		if err != nil {
			t.Fatal(err)
		}
		waitFile(t, console, want, 3*time.Minute)
	}
	if out, err := kubectl(t, kubeconfig, "", "delete", "machines", "--all", "-n", "default", "--wait", "--timeout=3m"); err != nil {
		t.Errorf("deleting the Machines: %v\n%s", err, out)
	}
	d.stop(syscall.SIGINT)
}

// waitFile waits until path holds want.
func waitFile(t *testing.T, path, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not say %q after %s:\n%s", path, want, limit, b)
		}
		time.Sleep(time.Second)
	}
}
