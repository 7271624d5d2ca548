package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

// agentsDir is bin/build-agent, failing the test when an architecture's agent is missing.
func agentsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(env.RepoRoot, "bin", "build-agent")
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
`+files+`  output: {repository: REGISTRY/default/e2e-os, tag: "1"}
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
spec: {machineClassRef: {name: e2e-builder}, architecture: amd64, image: REGISTRY/default/e2e-os:1}
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: built-arm64, namespace: default}
spec: {machineClassRef: {name: e2e-builder}, architecture: arm64, image: REGISTRY/default/e2e-os:1}
`

// One recipe, built natively for amd64 and arm64 on builder Machines of each architecture
// (QEMU pools of anvil dev), published as one index; then what a user and the fleet do next:
// an arm64 pool appears (only arm64 builds, the index grows), reorder (nothing builds),
// change arm64's steps (only arm64 builds; only the arm64 Machine is out of date), change
// both (the figure against builds run by hand), crash anvil mid-build (the build completes
// with no second builder), and break arm64 (the tag stays, or under CarryForward moves with
// arm64's old entry).
func TestImageBuildPublishesOneIndexEachArchitectureBuiltOnItsOwn(t *testing.T) {
	state := shortDir(t)
	t.Cleanup(func() {
		devproc.KillQemu(state)
	})
	registry := "127.0.0.1:" + devproc.FreePort(t)
	_, port, _ := strings.Cut(registry, ":")
	args := []string{"--state-dir", state, "--bin-dir", env.BinDir,
		"--apiserver-port", devproc.FreePort(t), "--etcd-port", devproc.FreePort(t), "--etcd-peer-port", devproc.FreePort(t),
		"--registry-port", port, "--qemu-pools=true", "--metal-pool=false", "--fake-pool=",
		"--test-os", testos.Dir(t), "--agents", agentsDir(t)}
	d := env.StartDev(t, append(args, "--qemu-architectures=amd64")...)
	kc := filepath.Join(state, "kubeconfig")
	env.Apply(t, kc, builderClass)
	base := "ARG TARGETARCH\nLABEL dev.anvil.arch=$TARGETARCH\nRUN mkdir -p /etc/anvil && echo \"built-on=$(uname -m)\" > /etc/anvil/build"
	recipe := osImageManifest{registry: registry, archs: "[]", publish: "AllArchitectures", common: base,
		arm64: "RUN echo arm-only > /etc/anvil/arm"}

	// 1. With architectures empty and only an amd64 pool, amd64 alone builds.
	env.Apply(t, kc, recipe.String())
	first := waitOSImage(t, kc, "published", func(o *imagesv1alpha1.OSImage) bool { return ready(o) && o.Status.Index != "" })
	if got := builderEvents(t, kc); strings.Join(got, " ") != "amd64" {
		t.Errorf("builders created: %v, want one amd64", got)
	}
	if platforms, _ := readIndex(t, state, registry); platforms != "linux/amd64" {
		t.Errorf("index platforms %q, want linux/amd64 alone", platforms)
	}

	// 2. An arm64 pool appears (anvil dev restarted with one): arm64 alone builds and the
	// index grows, amd64's entry as it was.
	d.Stop(syscall.SIGINT)
	d = env.StartDev(t, args...)
	grown := waitOSImage(t, kc, "grown", func(o *imagesv1alpha1.OSImage) bool { return ready(o) && o.Status.Index != first.Status.Index })
	if got := builderEvents(t, kc); strings.Join(got, " ") != "amd64 arm64" {
		t.Errorf("builders created: %v, want one more, for arm64", got)
	}
	platforms, entries := readIndex(t, state, registry)
	if platforms != "linux/amd64 linux/arm64" || entries["amd64"] != publishedEntry(first, "amd64") || entries["amd64"] == entries["arm64"] {
		t.Errorf("index platforms %q entries %v, want linux/amd64 (unchanged: %s) and linux/arm64", platforms, entries, publishedEntry(first, "amd64"))
	}
	env.WaitKubectlFor(t, kc, 2*time.Minute, "builders deleted", func(s string) bool { return strings.TrimSpace(s) == "" },
		"get", "machines", "-n", "default", "-l", "images.anvil.dev/osimage=e2e-os", "-o", "name")

	// Machines of both architectures boot the output and say where it was built; they are
	// then powered off (their status keeps what they booted) to leave the CPUs to builders.
	env.Apply(t, kc, strings.ReplaceAll(builtMachines, "REGISTRY", registry))
	for arch, want := range map[string]string{"amd64": "built-on=x86_64", "arm64": "built-on=aarch64"} {
		machine := "built-" + arch
		env.WaitKubectl(t, kc, "Running", "get", "machine", machine, "-n", "default", "-o", "jsonpath={.status.state}")
		waitConsole(t, kc, machine, want, 1)
		env.WaitKubectl(t, kc, computev1alpha1.ReasonImageCurrent, "get", "machine", machine, "-n", "default", "-o", upToDateReason)
		if out, err := env.Kubectl(t, kc, "", "patch", "machine", machine, "-n", "default", "--type=merge", "-p", `{"spec":{"power":"Off"}}`); err != nil {
			t.Fatalf("powering off %s: %v\n%s", machine, err, out)
		}
	}

	// 3. Naming the architectures, in another order, and reordering the Containerfiles
	// builds nothing: the same inputs.
	recipe.archs, recipe.armFirst = "[arm64, amd64]", true
	env.Apply(t, kc, recipe.String())
	same := waitOSImage(t, kc, "reordered", func(o *imagesv1alpha1.OSImage) bool { return ready(o) })
	if same.Status.Index != grown.Status.Index || same.Status.LatestBuild != grown.Status.LatestBuild {
		t.Errorf("after reordering: index %s build %s, want %s %s", same.Status.Index, same.Status.LatestBuild, grown.Status.Index, grown.Status.LatestBuild)
	}
	if got := builderEvents(t, kc); len(got) != 2 {
		t.Errorf("reordering started builders: %v", got)
	}

	// 4. Changing arm64's own steps builds arm64 alone; amd64's entry stays as it was, and
	// only the arm64 Machine is moved to the new index by the OSImage's rollout. Its
	// builder, deleted while it runs, is lost: a second attempt on a new Machine builds it.
	recipe.arm64 = "RUN echo arm-changed > /etc/anvil/arm"
	env.Apply(t, kc, recipe.String())
	arm64Builder := []string{"machines", "-n", "default", "-l", "images.anvil.dev/osimage=e2e-os,images.anvil.dev/architecture=arm64"}
	env.WaitKubectlFor(t, kc, 5*time.Minute, "the arm64 builder running", func(s string) bool { return s == "Running" },
		append(append([]string{"get"}, arm64Builder...), "-o", "jsonpath={.items[*].status.state}")...)
	if out, err := env.Kubectl(t, kc, "", append(append([]string{"delete"}, arm64Builder...), "--wait=false")...); err != nil {
		t.Fatalf("deleting the arm64 builder: %v\n%s", err, out)
	}
	second := waitOSImage(t, kc, "arm64 rebuilt", func(o *imagesv1alpha1.OSImage) bool { return ready(o) && o.Status.Index != grown.Status.Index })
	if got := builderEvents(t, kc); strings.Join(got, " ") != "amd64 arm64 arm64 arm64" {
		t.Errorf("builders created: %v, want two more, both arm64 (the lost attempt and its retry)", got)
	}
	if out, _ := env.Kubectl(t, kc, "", "get", "osimagebuild", second.Status.LatestBuild, "-n", "default", "-o",
		`jsonpath={.status.architectures[?(@.architecture=="arm64")].attempts}`); out != "2" {
		t.Errorf("arm64 attempts %q, want 2", out)
	}
	if out, _ := env.Kubectl(t, kc, "", "get", "events", "-n", "default", "--field-selector", "reason=AttemptFailed", "-o", "jsonpath={.items[*].message}"); !strings.HasPrefix(out, "arm64 attempt 1: BuilderLost: ") {
		t.Errorf("AttemptFailed events %q, want one saying arm64's first builder was lost", out)
	}
	_, entries2 := readIndex(t, state, registry)
	if entries2["amd64"] != entries["amd64"] || entries2["arm64"] == entries["arm64"] {
		t.Errorf("entries before %v, after %v: want amd64 unchanged and arm64 new", entries, entries2)
	}
	// The rollout reimages the arm64 Machine (powered off, it stays off) to the new index;
	// the amd64 Machine's entry did not change, so it is never asked.
	env.WaitKubectlFor(t, kc, 3*time.Minute, "built-arm64 reimaged to the new index", func(s string) bool { return s == second.Status.Index },
		"get", "machine", "built-arm64", "-n", "default", "-o", "jsonpath={.status.image.digest}")
	env.WaitKubectl(t, kc, computev1alpha1.ReasonImageCurrent, "get", "machine", "built-arm64", "-n", "default", "-o", upToDateReason)
	env.WaitKubectl(t, kc, computev1alpha1.ReasonImageCurrent, "get", "machine", "built-amd64", "-n", "default", "-o", upToDateReason)
	env.WaitKubectl(t, kc, imagesv1alpha1.ReasonRolloutComplete, "get", "osimage", "e2e-os", "-n", "default", "-o",
		`jsonpath={.status.conditions[?(@.type=="RollingOut")].reason}`)
	if out, _ := env.Kubectl(t, kc, "", "get", "machine", "built-amd64", "-n", "default", "-o", `jsonpath={.metadata.annotations.images\.anvil\.dev/rollout-target}`); out != "" {
		t.Errorf("built-amd64, whose entry did not change, was asked to move to %q", out)
	}

	// 5. Both change: both rebuild, in parallel. (The wall-time figure against builders run
	// by hand is taken by test/scale/imagebuild.)
	recipe.common = base + "\nRUN echo both > /etc/anvil/both"
	changed := time.Now()
	env.Apply(t, kc, recipe.String())
	third := waitOSImage(t, kc, "both rebuilt", func(o *imagesv1alpha1.OSImage) bool { return ready(o) && o.Status.Index != second.Status.Index })
	if got := builderEvents(t, kc); len(got) != 6 {
		t.Errorf("builders created: %v, want one more per architecture", got)
	}
	times, _ := env.Kubectl(t, kc, "", "get", "osimagebuild", third.Status.LatestBuild, "-n", "default", "-o",
		`jsonpath={.metadata.creationTimestamp}{range .status.architectures[*]} {.architecture} {.startTime}..{.completionTime}{end}`)
	t.Logf("both architectures rebuilt and published after %s; build created, each architecture's attempt: %s", time.Since(changed).Round(100*time.Millisecond), times)

	// 6. anvil dev (manager, pools, registry) killed while both builders run: after a
	// restart the builders are found, none is started twice, and the build completes.
	recipe.common = base + "\nRUN sleep 40"
	env.Apply(t, kc, recipe.String())
	env.WaitKubectlFor(t, kc, 5*time.Minute, "two builders running", func(s string) bool { return s == "Running Running" },
		"get", "machines", "-n", "default", "-l", "images.anvil.dev/osimage=e2e-os", "-o", "jsonpath={range .items[*]}{.status.state} {end}")
	d.Kill(state)
	d = env.StartDev(t, args...)
	fourth := waitOSImage(t, kc, "built across a crash", func(o *imagesv1alpha1.OSImage) bool { return ready(o) && o.Status.Index != third.Status.Index })
	if got := builderEvents(t, kc); len(got) != 8 {
		attempts, _ := env.Kubectl(t, kc, "", "get", "osimagebuild", fourth.Status.LatestBuild, "-n", "default", "-o",
			`jsonpath={range .status.architectures[*]}{.architecture}: attempt {.attempts} {.phase} {.reason} {.message}{"\n"}{end}`)
		ended, _ := env.Kubectl(t, kc, "", "get", "events", "-n", "default", "--field-selector", "reason=AttemptFailed",
			"-o", `jsonpath={range .items[*]}{.message}{"\n"}{end}`)
		t.Errorf("builders created: %v, want exactly one more per architecture across the crash; the build:\n%sattempts that failed:\n%s", got, attempts, ended)
	}

	// 7. A failing arm64 step with a changed amd64: amd64 builds, arm64 fails with its line,
	// and under AllArchitectures the tag does not move.
	recipe.common = base + "\nRUN echo v2 > /etc/anvil/version"
	recipe.arm64 = "RUN echo about to fail && false"
	env.Apply(t, kc, recipe.String())
	broken := waitOSImage(t, kc, "arm64 failed", func(o *imagesv1alpha1.OSImage) bool {
		c := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionReady)
		return c != nil && c.Reason == imagesv1alpha1.ReasonBuildFailed
	})
	if broken.Status.Index != fourth.Status.Index {
		t.Errorf("a failed build moved the tag: %s, want %s", broken.Status.Index, fourth.Status.Index)
	}
	_, entries4 := readIndex(t, state, registry)
	if entries4["amd64"] != publishedEntry(fourth, "amd64") || entries4["arm64"] != publishedEntry(fourth, "arm64") {
		t.Errorf("the registry's tag moved after a failed build: %v", entries4)
	}
	out, _ := env.Kubectl(t, kc, "", "get", "osimagebuild", broken.Status.LatestBuild, "-n", "default", "-o",
		`jsonpath={range .status.architectures[*]}{.architecture}={.phase}/{.reason}: {.message} | {.logTail}{"\n"}{end}`)
	if !strings.Contains(out, "amd64=Succeeded") || !strings.Contains(out, "arm64=Failed/StepFailed") ||
		!strings.Contains(out, "RUN echo about to fail && false") || !strings.Contains(out, "about to fail\n") {
		t.Errorf("the failed build's status does not name the failing step and its log:\n%s", out)
	}

	// 8. CarryForward publishes amd64's new entry with arm64's previous one, and says so.
	recipe.publish = "CarryForward"
	env.Apply(t, kc, recipe.String())
	carried := waitOSImage(t, kc, "carried forward", func(o *imagesv1alpha1.OSImage) bool { return ready(o) && o.Status.Index != fourth.Status.Index })
	degraded := meta.FindStatusCondition(carried.Status.Conditions, imagesv1alpha1.ConditionDegraded)
	if degraded == nil || degraded.Status != metav1.ConditionTrue || !strings.Contains(degraded.Message, "arm64") {
		t.Errorf("Degraded = %+v, want True naming arm64", degraded)
	}
	_, entries5 := readIndex(t, state, registry)
	if entries5["arm64"] != entries4["arm64"] || entries5["amd64"] == entries4["amd64"] {
		t.Errorf("carried-forward index %v: want arm64 %s kept and a new amd64", entries5, entries4["arm64"])
	}
	if out, err := env.Kubectl(t, kc, "", "delete", "machines", "--all", "-n", "default", "--wait", "--timeout=3m"); err != nil {
		t.Errorf("deleting the Machines: %v\n%s", err, out)
	}
	d.Stop(syscall.SIGINT)
}

// upToDateReason is the kubectl output of a Machine's ImageUpToDate reason.
const upToDateReason = `jsonpath={.status.conditions[?(@.type=="ImageUpToDate")].reason}`

func publishedEntry(o *imagesv1alpha1.OSImage, arch string) string {
	for _, e := range o.Status.Published {
		if string(e.Architecture) == arch {
			return e.Digest
		}
	}
	return ""
}

func ready(o *imagesv1alpha1.OSImage) bool {
	return o.Status.ObservedGeneration == o.Generation && meta.IsStatusConditionTrue(o.Status.Conditions, imagesv1alpha1.ConditionReady)
}

// waitOSImage waits until the OSImage e2e-os satisfies ok, showing its builds on failure.
func waitOSImage(t *testing.T, kc, what string, ok func(*imagesv1alpha1.OSImage) bool) *imagesv1alpha1.OSImage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Minute)
	for {
		out, err := env.Kubectl(t, kc, "", "get", "osimage", "e2e-os", "-n", "default", "-o", "json")
		o := &imagesv1alpha1.OSImage{}
		if err == nil && json.Unmarshal([]byte(out), o) == nil && o.Status.ObservedGeneration == o.Generation && ok(o) {
			return o
		}
		if time.Now().After(deadline) {
			builds, _ := env.Kubectl(t, kc, "", "get", "osimagebuilds,machines", "-n", "default", "-o", "yaml")
			t.Fatalf("OSImage not %s after 20 minutes:\n%s\n%s", what, out, builds)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// builderEvents lists the architecture of every builder Machine created so far, sorted.
func builderEvents(t *testing.T, kc string) []string {
	t.Helper()
	out, err := env.Kubectl(t, kc, "", "get", "events", "-n", "default", "--field-selector", "reason=BuilderCreated",
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

// readIndex reads the published tag as an OCI index, as anvil dev's pools do (with their
// read credential: the registry refuses anonymous reads): its platforms and each entry's
// digest.
func readIndex(t *testing.T, state, registry string) (string, map[string]string) {
	t.Helper()
	ref, err := name.ParseReference(registry+"/default/e2e-os:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	logins, err := registrynet.LoadLogins(filepath.Join(state, "registry-read.json"))
	if err != nil {
		t.Fatal(err)
	}
	pools := registrynet.Policy{AnyAddress: true, Logins: logins}.Transport()
	idx, err := remote.Index(ref, remote.WithContext(context.Background()), remote.WithTransport(pools))
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
