package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
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

const builderClass = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata:
  name: e2e-builder
capabilities:
  cpu: "1"
  memory: 1Gi
`

// osImageManifest is the e2e OSImage; each step of the test changes one thing in it.
type osImageManifest struct {
	registry, archs, common, arm64, publish string
	armFirst                                bool
}

func (m osImageManifest) String() string {
	common := "    - content: |\n" + indent(m.common, 8)
	arm := "    - architecture: arm64\n      content: |\n" + indent(m.arm64, 8)
	files := common + arm
	if m.armFirst {
		files = arm + common
	}
	return strings.ReplaceAll(`apiVersion: images.anvil.dev/v1alpha1
kind: OSImage
metadata:
  name: e2e-os
  namespace: default
spec:
  base: REGISTRY/anvil/testos:latest
  architectures: `+m.archs+`
  containerfiles:
`+files+`  output: {repository: REGISTRY/e2e/os, tag: "1"}
  publish: `+m.publish+`
  builder:
    machineClassRef: {name: e2e-builder}
    allowEmulated: true
    timeout: 15m
`, "REGISTRY", m.registry)
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad) + "\n"
}

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
// (QEMU pools of anvil dev), published as one index; then what a user does next: reorder
// (nothing builds), change arm64's steps (only arm64 builds), break arm64 (the tag stays, or
// under CarryForward moves with arm64's old entry), and boot the result on both.
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
	kc := filepath.Join(state, "kubeconfig")
	apply := func(manifest string) {
		t.Helper()
		if out, err := kubectl(t, kc, manifest, "apply", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
	}
	apply(builderClass)
	recipe := osImageManifest{registry: registry, archs: "[arm64, amd64]", publish: "AllArchitectures",
		common: "ARG TARGETARCH\nLABEL dev.anvil.arch=$TARGETARCH\nRUN mkdir -p /etc/anvil && echo \"built-on=$(uname -m)\" > /etc/anvil/build",
		arm64:  "RUN echo arm-only > /etc/anvil/arm"}

	// 1. Both architectures build, each once, and one index is published.
	started := time.Now()
	apply(recipe.String())
	first := waitOSImage(t, kc, "published", func(o *imagesv1alpha1.OSImage) bool { return ready(o) && o.Status.Index != "" })
	t.Logf("first build: published %s after %s", first.Status.Index, time.Since(started).Round(time.Second))
	if got := builderEvents(t, kc); strings.Join(got, " ") != "amd64 arm64" {
		t.Errorf("builders created: %v, want one amd64 and one arm64", got)
	}
	platforms, entries := readIndex(t, registry)
	if platforms != "linux/amd64 linux/arm64" || entries["amd64"] == entries["arm64"] {
		t.Errorf("index platforms %q entries %v, want an OCI index of linux/amd64 and linux/arm64", platforms, entries)
	}
	waitKubectlFor(t, kc, 2*time.Minute, "builders deleted", func(s string) bool { return strings.TrimSpace(s) == "" },
		"get", "machines", "-n", "default", "-l", "images.anvil.dev/osimage=e2e-os", "-o", "name")

	// 2. Reordering the architectures and the Containerfiles builds nothing.
	recipe.archs, recipe.armFirst = "[amd64, arm64]", true
	apply(recipe.String())
	same := waitOSImage(t, kc, "reordered", func(o *imagesv1alpha1.OSImage) bool { return ready(o) })
	if same.Status.Index != first.Status.Index || same.Status.LatestBuild != first.Status.LatestBuild {
		t.Errorf("after reordering: index %s build %s, want %s %s", same.Status.Index, same.Status.LatestBuild, first.Status.Index, first.Status.LatestBuild)
	}
	if got := builderEvents(t, kc); len(got) != 2 {
		t.Errorf("reordering started builders: %v", got)
	}

	// 3. Changing arm64's own steps builds arm64 alone; amd64's entry stays as it was.
	recipe.arm64 = "RUN echo arm-changed > /etc/anvil/arm"
	apply(recipe.String())
	second := waitOSImage(t, kc, "arm64 rebuilt", func(o *imagesv1alpha1.OSImage) bool { return ready(o) && o.Status.Index != first.Status.Index })
	if got := builderEvents(t, kc); strings.Join(got, " ") != "amd64 arm64 arm64" {
		t.Errorf("builders created: %v, want one more, for arm64", got)
	}
	_, entries2 := readIndex(t, registry)
	if entries2["amd64"] != entries["amd64"] || entries2["arm64"] == entries["arm64"] {
		t.Errorf("entries before %v, after %v: want amd64 unchanged and arm64 new", entries, entries2)
	}

	// 4. A failing arm64 step with a changed amd64: amd64 builds, arm64 fails with its line,
	// and under AllArchitectures the tag does not move.
	recipe.common += "\nRUN echo v2 > /etc/anvil/version"
	recipe.arm64 = "RUN echo about to fail && false"
	apply(recipe.String())
	broken := waitOSImage(t, kc, "arm64 failed", func(o *imagesv1alpha1.OSImage) bool {
		c := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionReady)
		return c != nil && c.Reason == imagesv1alpha1.ReasonBuildFailed
	})
	if broken.Status.Index != second.Status.Index {
		t.Errorf("a failed build moved the tag: %s, want %s", broken.Status.Index, second.Status.Index)
	}
	if _, now := readIndex(t, registry); now["arm64"] != entries2["arm64"] || now["amd64"] != entries2["amd64"] {
		t.Errorf("the registry's tag moved after a failed build: %v", now)
	}
	out, _ := kubectl(t, kc, "", "get", "osimagebuild", broken.Status.LatestBuild, "-n", "default", "-o",
		`jsonpath={range .status.architectures[*]}{.architecture}={.phase}/{.reason}: {.message} | {.logTail}{"\n"}{end}`)
	if !strings.Contains(out, "amd64=Succeeded") || !strings.Contains(out, "arm64=Failed/StepFailed") ||
		!strings.Contains(out, "RUN echo about to fail && false") || !strings.Contains(out, "about to fail\n") {
		t.Errorf("the failed build's status does not name the failing step and its log:\n%s", out)
	}

	// 5. CarryForward publishes amd64's new entry with arm64's previous one, and says so.
	recipe.publish = "CarryForward"
	apply(recipe.String())
	carried := waitOSImage(t, kc, "carried forward", func(o *imagesv1alpha1.OSImage) bool { return ready(o) && o.Status.Index != second.Status.Index })
	degraded := meta.FindStatusCondition(carried.Status.Conditions, imagesv1alpha1.ConditionDegraded)
	if degraded == nil || degraded.Status != metav1.ConditionTrue || !strings.Contains(degraded.Message, "arm64") {
		t.Errorf("Degraded = %+v, want True naming arm64", degraded)
	}
	_, entries3 := readIndex(t, registry)
	if entries3["arm64"] != entries2["arm64"] || entries3["amd64"] == entries2["amd64"] {
		t.Errorf("carried-forward index %v: want arm64 %s kept and a new amd64", entries3, entries2["arm64"])
	}

	// Machines of both architectures boot the output and say where it was built.
	apply(strings.ReplaceAll(builtMachines, "REGISTRY", registry))
	for arch, want := range map[string]string{"amd64": "built-on=x86_64", "arm64": "built-on=aarch64"} {
		machine := "built-" + arch
		waitKubectl(t, kc, "Running", "get", "machine", machine, "-n", "default", "-o", "jsonpath={.status.state}")
		console, err := kubectl(t, kc, "", "get", "machine", machine, "-n", "default", "-o", "jsonpath={.status.console}")
		if err != nil {
			t.Fatal(err)
		}
		waitConsole(t, console, want, 1)
	}
	if out, err := kubectl(t, kc, "", "delete", "machines", "--all", "-n", "default", "--wait", "--timeout=3m"); err != nil {
		t.Errorf("deleting the Machines: %v\n%s", err, out)
	}
	d.stop(syscall.SIGINT)
}

func ready(o *imagesv1alpha1.OSImage) bool {
	return o.Status.ObservedGeneration == o.Generation && meta.IsStatusConditionTrue(o.Status.Conditions, imagesv1alpha1.ConditionReady)
}

// waitOSImage waits until the OSImage e2e-os satisfies ok, showing its builds on failure.
func waitOSImage(t *testing.T, kc, what string, ok func(*imagesv1alpha1.OSImage) bool) *imagesv1alpha1.OSImage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Minute)
	for {
		out, err := kubectl(t, kc, "", "get", "osimage", "e2e-os", "-n", "default", "-o", "json")
		o := &imagesv1alpha1.OSImage{}
		if err == nil && json.Unmarshal([]byte(out), o) == nil && o.Status.ObservedGeneration == o.Generation && ok(o) {
			return o
		}
		if time.Now().After(deadline) {
			builds, _ := kubectl(t, kc, "", "get", "osimagebuilds,machines", "-n", "default", "-o", "yaml")
			t.Fatalf("OSImage not %s after 20 minutes:\n%s\n%s", what, out, builds)
		}
		time.Sleep(2 * time.Second)
	}
}

// builderEvents lists the architecture of every builder Machine created so far, sorted.
func builderEvents(t *testing.T, kc string) []string {
	t.Helper()
	out, err := kubectl(t, kc, "", "get", "events", "-n", "default", "--field-selector", "reason=BuilderCreated",
		"-o", `jsonpath={range .items[*]}{.message}{"\n"}{end}`)
	if err != nil {
		t.Fatalf("kubectl get events: %v\n%s", err, out)
	}
	var archs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if arch, _, ok := strings.Cut(line, " "); ok {
			archs = append(archs, arch)
		}
	}
	sort.Strings(archs)
	return archs
}

// readIndex reads the published tag as an OCI index: its platforms and each entry's digest.
func readIndex(t *testing.T, registry string) (string, map[string]string) {
	t.Helper()
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
	if m.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("the published tag is a %s, want an OCI image index", m.MediaType)
	}
	var platforms []string
	entries := map[string]string{}
	for _, e := range m.Manifests {
		platforms = append(platforms, e.Platform.OS+"/"+e.Platform.Architecture)
		entries[e.Platform.Architecture] = e.Digest.String()
	}
	return strings.Join(platforms, " "), entries
}
