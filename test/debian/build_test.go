package debian

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/api/meta"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/guestssh"
	"github.com/anvil-dev/anvil/test/pkgproxy"
	"github.com/anvil-dev/anvil/test/testos"
)

// builderClass is the builders' class: a disk root's build holds the pulled base disk,
// then the written image, in the builder's memory.
const builderClass = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: debian-builder}
capabilities: {cpu: "1", memory: 2Gi}
`

// buildRecipe is an OSImage on the Debian image's disk form with every kind of step;
// PACKAGES is what line 6 installs. Its Machines move to a new index one per pool at a time.
// Builders run on the QEMU pools, whose builder network forwards the registry and the
// package proxy: without the selector the metal pool of the rollout test's anvil dev took
// one, and its server (an Ironic fake node) never built.
const buildRecipe = `
apiVersion: v1
kind: ConfigMap
metadata: {name: debian-build-files, namespace: default}
data:
  notes.txt: "copied from the context\n"
---
apiVersion: images.anvil.dev/v1alpha1
kind: OSImage
metadata: {name: debian-hello, namespace: default}
spec:
  base: REGISTRY/anvil/debian:12
  architectures: ARCHS
  containerfiles:
  - content: |
      ARG TARGETARCH
      ENV GREETING="built for $TARGETARCH"
      WORKDIR /opt/anvil
      COPY notes.txt /opt/anvil/notes.txt
      RUN echo "$GREETING in $(pwd)" > built
      RUN apt-get update && apt-get install -y PACKAGES
  context:
  - path: notes.txt
    configMapKeyRef: {name: debian-build-files, key: notes.txt}
  output: {repository: REGISTRY/default/debian-hello, tag: "1"}
  builder:
    machineClassRef: {name: debian-builder}
    machinePoolSelector: {compute.anvil.dev/runtime: qemu}
    allowEmulated: true
    timeout: 90m
    retries: 0
  rollout: {maxUnavailable: 1, progressDeadlineSeconds: 1800}
`

// ramRecipe is an OSImage on the Debian image's RAM form, for servers: the root is the
// initramfs, which the builder unpacks, changes and packs again. RELEASE is what it writes.
const ramRecipe = `
apiVersion: images.anvil.dev/v1alpha1
kind: OSImage
metadata: {name: debian-ram-release, namespace: default}
spec:
  base: REGISTRY/anvil/debian-ram:12
  architectures: [amd64]
  containerfiles:
  - content: |
      ARG TARGETARCH
      RUN mkdir -p /etc/anvil && echo "RELEASE for $TARGETARCH" > /etc/anvil/release
  output: {repository: REGISTRY/default/debian-ram-release, tag: "1"}
  builder:
    machineClassRef: {name: debian-builder}
    machinePoolSelector: {compute.anvil.dev/runtime: qemu}
    allowEmulated: true
    timeout: 60m
    retries: 0
  rollout: {maxUnavailable: 1, progressDeadlineSeconds: 1800}
`

// Debian as users build and update it, on anvil dev's QEMU pools and an emulated server:
//   - An OSImage on the disk form builds for amd64 and arm64 with ENV, WORKDIR, COPY and
//     apt-get through the package proxy the test runs (forwarded onto the builders' network
//     by anvil dev --package-proxy) and publishes one index; one on the RAM form builds for
//     amd64 (the root is the initramfs).
//   - A VM of each architecture boots the first with a data disk, the server boots the
//     second; over SSH each has what its steps made, and cloud-init is done. The test writes
//     a file on each one's data disk (the server's own disk for the server).
//   - A one-package change and a new release publish new indexes; the OSImages' rollouts
//     reimage the three Machines (the server through Ironic, in place): each runs the new
//     index, has the new package or release, cloud-init is done again without errors, and
//     the data disk's file is still there.
//   - A package that does not exist: the step fails naming its line, the index stays, the
//     builder is gone.
func TestDebianOSImagesBuildAndRollOut(t *testing.T) {
	proxy := startPackageProxy(t)
	d := startDev(t, devOptions{amd64Servers: 1, packageProxy: proxy.Addr})
	env.Apply(t, d.kubeconfig, builderClass)
	registry := d.registry()

	start := time.Now()
	env.Apply(t, d.kubeconfig, recipeYAML(registry, "[]", "hello"))
	env.Apply(t, d.kubeconfig, ramRecipeYAML(registry, "v1"))
	o := waitPublished(t, d.kubeconfig, "debian-hello", "")
	t.Logf("OSImage created → index published (amd64 and arm64): %v", time.Since(start).Round(time.Second))
	logBuildTimes(t, d.kubeconfig, o.Status.LatestBuild)
	for _, arch := range testos.Architectures {
		if !proxyServed(proxy, "/pool/main/h/hello/hello_", "_"+string(arch)+".deb") {
			t.Errorf("the package proxy never served hello for %s: %v", arch, proxy.Requests())
		}
	}
	r := waitPublished(t, d.kubeconfig, "debian-ram-release", "")
	logBuildTimes(t, d.kubeconfig, r.Status.LatestBuild)
	waitBuildersGone(t, d.kubeconfig)

	// The outputs boot, each on its kind of pool, and get a file on their data disks.
	machines := []*rolledMachine{
		{name: "debian-amd64", arch: computev1alpha1.ArchitectureAMD64, image: registry + "/default/debian-hello:1", template: vmMachine, dataSectors: vmDataSectors},
		{name: "debian-arm64", arch: computev1alpha1.ArchitectureARM64, image: registry + "/default/debian-hello:1", template: vmMachine, dataSectors: vmDataSectors},
		{name: "debian-server-amd64", arch: computev1alpha1.ArchitectureAMD64, image: registry + "/default/debian-ram-release:1", template: serverMachine, dataSectors: serverDiskSectors},
	}
	for _, m := range machines {
		m.id = createMachine(t, d.kubeconfig, m.template, m.arch, m.image)
	}
	for _, m := range machines {
		c := env.Login(t, d.kubeconfig, m.name, m.id)
		checkBuilt(t, m, c, "hello", "v1")
		writeDataDisk(t, m, c)
		c.Close()
	}

	// One package more, and a new release: new indexes, and the rollouts move the Machines.
	changed := time.Now()
	env.Apply(t, d.kubeconfig, recipeYAML(registry, "[]", "hello tree"))
	env.Apply(t, d.kubeconfig, ramRecipeYAML(registry, "v2"))
	o2 := waitPublished(t, d.kubeconfig, "debian-hello", o.Status.Index)
	t.Logf("one package more → new index published (amd64 and arm64): %v", time.Since(changed).Round(time.Second))
	logBuildTimes(t, d.kubeconfig, o2.Status.LatestBuild)
	r2 := waitPublished(t, d.kubeconfig, "debian-ram-release", r.Status.Index)
	// Complete for the new index with every Machine updated: the condition still says
	// Complete from the first index until the controller starts the new rollout.
	for _, o := range []struct {
		name, index string
		machines    int
	}{{"debian-hello", o2.Status.Index, 2}, {"debian-ram-release", r2.Status.Index, 1}} {
		want := fmt.Sprintf("%s %d %s", o.index, o.machines, imagesv1alpha1.ReasonRolloutComplete)
		env.WaitKubectlFor(t, d.kubeconfig, 40*time.Minute, o.name+"'s rollout complete", func(s string) bool { return s == want },
			"get", "osimage", o.name, "-n", "default", "-o", `jsonpath={.status.rollout.target} {.status.rollout.updated} {.status.conditions[?(@.type=="RollingOut")].reason}`)
	}
	t.Logf("new indexes → both rollouts complete: %v", time.Since(changed).Round(time.Second))
	for _, m := range machines {
		want := o2.Status.Index
		if m.template == serverMachine {
			want = r2.Status.Index
		}
		if got, _ := env.Kubectl(t, d.kubeconfig, "", "get", "machine", m.name, "-o", "jsonpath={.status.image.digest}"); got != want {
			t.Errorf("%s runs %q after the rollout, want the new index %s", m.name, got, want)
		}
		if got, _ := env.Kubectl(t, d.kubeconfig, "", "get", "events", "-n", "default", "--field-selector", "reason=Reimaged,involvedObject.name="+m.name, "-o", "name"); got == "" {
			t.Errorf("%s: no Reimaged Event", m.name)
		}
		c := env.Login(t, d.kubeconfig, m.name, m.id)
		checkBuilt(t, m, c, "tree", "v2")
		checkDataDisk(t, m, c)
		c.Close()
	}

	// A package that does not exist: StepFailed naming line 6, the index untouched.
	env.Apply(t, d.kubeconfig, recipeYAML(registry, "[amd64]", "anvil-no-such-package"))
	failed := waitOSImage(t, d.kubeconfig, "debian-hello", 60*time.Minute, "the failed build", "", func(o *imagesv1alpha1.OSImage) bool {
		c := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionReady)
		return c != nil && c.Reason == imagesv1alpha1.ReasonBuildFailed
	})
	if failed.Status.Index != o2.Status.Index {
		t.Errorf("index %s after the failed build, want it untouched (%s)", failed.Status.Index, o2.Status.Index)
	}
	b := getBuild(t, d.kubeconfig, failed.Status.LatestBuild)
	want := "line 6: RUN apt-get update && apt-get install -y anvil-no-such-package: exited with status 100"
	if len(b.Status.Architectures) != 1 || b.Status.Architectures[0].Reason != "StepFailed" || !strings.Contains(b.Status.Architectures[0].Message, want) {
		t.Errorf("build status %+v, want amd64 StepFailed saying %q", b.Status.Architectures, want)
	}
	if tag, _ := env.Kubectl(t, d.kubeconfig, "", "get", "osimage", "debian-hello", "-o", "jsonpath={.status.index}"); tag != o2.Status.Index {
		t.Errorf("status.index %q, want %q", tag, o2.Status.Index)
	}
	waitBuildersGone(t, d.kubeconfig)
}

// rolledMachine is one of the Machines a rollout moves.
type rolledMachine struct {
	name     string
	arch     computev1alpha1.Architecture
	image    string // the OSImage's output tag
	template string // vmMachine or serverMachine
	// dataSectors is the size of the disk that keeps its data across a reimage, in 512-byte
	// sectors as /sys/block shows it: how the guest tells it from the others.
	dataSectors int64
	id          *guestssh.Identity
}

const (
	vmDataSectors     = 1 << 30 / 512 // vmMachine's data volume, 1 GiB
	serverDiskSectors = 8 << 30 / 512 // an emulated server's own disk (internal/dev)
)

// checkBuilt asks m's guest, logged in as c, whether it runs what its OSImage built:
// on a VM the installed package pkg and the other steps' files, on the server the release
// written; and whether cloud-init is done without warnings.
func checkBuilt(t *testing.T, m *rolledMachine, c *ssh.Client, pkg, release string) {
	t.Helper()
	checks := []struct{ command, want string }{
		{"cloud-init status --wait", "status: done"},
		{"uname -m", testos.UnameMachine(m.arch)},
	}
	if m.template == serverMachine {
		checks = append(checks, struct{ command, want string }{"cat /etc/anvil/release", release + " for " + string(m.arch)})
	} else {
		checks = append(checks, []struct{ command, want string }{
			{"hello", "Hello, world!"},
			{"dpkg-query -W -f '${Status}' " + pkg, "install ok installed"},
			{"cat /opt/anvil/built", "built for " + string(m.arch) + " in /opt/anvil"},
			{"cat /opt/anvil/notes.txt", "copied from the context"},
		}...)
	}
	for _, check := range checks {
		out, err := guestssh.Run(c, check.command)
		if err != nil || !strings.Contains(out, check.want) {
			t.Errorf("%s: %q = %q (%v), want it to say %q", m.name, check.command, strings.TrimSpace(out), err, check.want)
		}
	}
	if out, _ := guestssh.Run(c, "sudo grep -E 'WARNING|ERROR|Traceback' /var/log/cloud-init.log"); strings.TrimSpace(out) != "" {
		t.Errorf("%s: cloud-init's log has warnings or errors:\n%s", m.name, out)
	}
}

// writeDataDisk makes a filesystem labelled anvil-data on m's data disk, with a file
// naming m.
func writeDataDisk(t *testing.T, m *rolledMachine, c *ssh.Client) {
	t.Helper()
	script := fmt.Sprintf(`set -e
for d in /sys/block/vd*; do [ "$(cat $d/size)" = %d ] && dev=/dev/${d##*/}; done
[ -n "$dev" ] || { echo "no disk of %d sectors"; exit 1; }
sudo mkfs.ext4 -q -F -L anvil-data $dev
sudo mount $dev /mnt
echo kept by %s | sudo tee /mnt/kept
sudo umount /mnt`, m.dataSectors, m.dataSectors, m.name)
	if out, err := guestssh.Run(c, script); err != nil {
		t.Fatalf("%s: writing the data disk: %v\n%s", m.name, err, out)
	}
}

// checkDataDisk reads back, after the reimage, the file writeDataDisk left.
func checkDataDisk(t *testing.T, m *rolledMachine, c *ssh.Client) {
	t.Helper()
	out, err := guestssh.Run(c, "sudo mount -L anvil-data /mnt && cat /mnt/kept; sudo umount /mnt")
	if err != nil || !strings.Contains(out, "kept by "+m.name) {
		t.Errorf("%s: the data disk after the reimage: %q (%v), want the file written before", m.name, strings.TrimSpace(out), err)
	}
}

// startPackageProxy runs the test's package proxy for Debian's archive, keeping packages
// in ~/.cache/anvil/pkgproxy across runs.
func startPackageProxy(t testing.TB) *pkgproxy.Proxy {
	t.Helper()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	p, err := pkgproxy.Start(filepath.Join(home, ".cache", "anvil", "pkgproxy"), "deb.debian.org")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// startDevForBuilds starts anvil dev with its QEMU pools, builders running the build agent
// of this checkout, the package proxy and the Debian image (anvil/debian:12 is the disk
// form), and creates the VMs' class; it returns the kubeconfig and registry.
func startDevForBuilds(t testing.TB, packageProxy string) (kubeconfig, registry string) {
	t.Helper()
	d := startDev(t, devOptions{packageProxy: packageProxy})
	return d.kubeconfig, d.registry()
}

// buildAgents builds anvil-build-agent from this checkout for each architecture, laid out
// as make agents lays out bin/build-agent. (This package imports buildagent, so go test's
// cache does not keep a result across a change of the agent's code.)
func buildAgents(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, arch := range testos.Architectures {
		out := filepath.Join(dir, string(arch), filepath.Base(buildagent.AgentPath))
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/anvil-build-agent")
		build.Dir = env.RepoRoot
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+string(arch))
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the agent for %s: %v\n%s", arch, err, b)
		}
	}
	return dir
}

// recipeYAML is buildRecipe for archs ("[]": every one) installing packages.
func recipeYAML(registry, archs, packages string) string {
	return strings.NewReplacer("REGISTRY", registry, "ARCHS", archs, "PACKAGES", packages).Replace(buildRecipe)
}

// ramRecipeYAML is ramRecipe writing release.
func ramRecipeYAML(registry, release string) string {
	return strings.NewReplacer("REGISTRY", registry, "RELEASE", release).Replace(ramRecipe)
}

func getOSImage(t testing.TB, kubeconfig, name string) *imagesv1alpha1.OSImage {
	t.Helper()
	out, err := env.Kubectl(t, kubeconfig, "", "get", "osimage", name, "-n", "default", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get osimage: %v\n%s", err, out)
	}
	o := &imagesv1alpha1.OSImage{}
	if err := json.Unmarshal([]byte(out), o); err != nil {
		t.Fatal(err)
	}
	return o
}

func getBuild(t testing.TB, kubeconfig, name string) *imagesv1alpha1.OSImageBuild {
	t.Helper()
	out, err := env.Kubectl(t, kubeconfig, "", "get", "osimagebuild", name, "-n", "default", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get osimagebuild: %v\n%s", err, out)
	}
	b := &imagesv1alpha1.OSImageBuild{}
	if err := json.Unmarshal([]byte(out), b); err != nil {
		t.Fatal(err)
	}
	return b
}

// waitPublished waits until OSImage name is Ready with an index other than old published
// for each architecture it builds, and fails the test if its build fails.
func waitPublished(t testing.TB, kubeconfig, name, old string) *imagesv1alpha1.OSImage {
	t.Helper()
	return waitOSImage(t, kubeconfig, name, 100*time.Minute, "published", imagesv1alpha1.ReasonBuildFailed, func(o *imagesv1alpha1.OSImage) bool {
		c := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionReady)
		archs := len(o.Spec.Architectures)
		if archs == 0 {
			archs = len(testos.Architectures)
		}
		return c != nil && c.Status == "True" && o.Status.Index != "" && o.Status.Index != old && len(o.Status.Published) == archs
	})
}

// waitOSImage polls OSImage name until done says so; it fails the test after limit, or at
// once when Ready's reason is stop, with the OSImage's conditions and its latest build's
// state.
func waitOSImage(t testing.TB, kubeconfig, name string, limit time.Duration, what, stop string, done func(*imagesv1alpha1.OSImage) bool) *imagesv1alpha1.OSImage {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		o := getOSImage(t, kubeconfig, name)
		current := o.Status.ObservedGeneration == o.Generation
		if current && done(o) {
			return o
		}
		ready := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionReady)
		if time.Now().After(deadline) || current && stop != "" && ready != nil && ready.Reason == stop {
			state := fmt.Sprintf("%+v", o.Status.Conditions)
			if o.Status.LatestBuild != "" {
				state += fmt.Sprintf("\nbuild: %+v", getBuild(t, kubeconfig, o.Status.LatestBuild).Status.Architectures)
			}
			t.Fatalf("OSImage %s %s: not within %v; last seen:\n%s", name, what, limit, state)
		}
		time.Sleep(10 * time.Second)
	}
}

// logBuildTimes logs each architecture's builder time (start to completion) and the agent's
// own lines of its log, each stamped with the time since the agent began: where the
// minutes went.
func logBuildTimes(t testing.TB, kubeconfig, build string) {
	t.Helper()
	b := getBuild(t, kubeconfig, build)
	// The pools' read credential, from anvil dev's state folder (the kubeconfig's).
	logins, err := registrynet.LoadLogins(filepath.Join(filepath.Dir(kubeconfig), "registry-read.json"))
	if err != nil {
		t.Fatal(err)
	}
	pools := registrynet.Policy{AnyAddress: true, Logins: logins}.Transport()
	for _, a := range b.Status.Architectures {
		if a.StartTime != nil && a.CompletionTime != nil {
			t.Logf("%s: %s in %v (%d attempt(s))", a.Architecture, a.Phase, a.CompletionTime.Sub(a.StartTime.Time), a.Attempts)
		}
		for _, in := range b.Spec.Architectures {
			if in.Architecture != a.Architecture {
				continue
			}
			_, log, err := buildagent.ReadResult(context.Background(), b.Spec.Output.Repository, imagebuild.LogTag(string(in.Architecture), in.InputHash, a.Attempts), 1<<20, remote.WithTransport(pools))
			if err != nil {
				t.Logf("%s: reading the build log: %v", a.Architecture, err)
				continue
			}
			for _, line := range strings.Split(log, "\n") {
				if strings.HasPrefix(line, "[") {
					t.Logf("%s: %s", a.Architecture, line)
				}
			}
		}
	}
}

func proxyServed(p *pkgproxy.Proxy, contains, suffix string) bool {
	for _, r := range p.Requests() {
		url, status, _ := strings.Cut(strings.TrimPrefix(r, "GET "), " ")
		if strings.Contains(url, contains) && strings.HasSuffix(url, suffix) && status == "200" {
			return true
		}
	}
	return false
}

// waitBuildersGone waits until no builder Machine is left.
func waitBuildersGone(t testing.TB, kubeconfig string) {
	t.Helper()
	env.WaitKubectlFor(t, kubeconfig, 3*time.Minute, "builders deleted", func(s string) bool { return strings.TrimSpace(s) == "" },
		"get", "machines", "-n", "default", "-l", imagesv1alpha1.LabelOSImage, "-o", "name")
}
