package debian

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/test/devproc"
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

// buildRecipe is an OSImage on the Debian image with every kind of step; PACKAGE is what
// line 6 installs.
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
      RUN apt-get update && apt-get install -y PACKAGE
  context:
  - path: notes.txt
    configMapKeyRef: {name: debian-build-files, key: notes.txt}
  output: {repository: REGISTRY/default/debian-hello, tag: "1"}
  builder:
    machineClassRef: {name: debian-builder}
    allowEmulated: true
    timeout: 90m
    retries: 0
`

// An OSImage on the Debian image (a disk root) builds for amd64 and arm64 on anvil dev's
// QEMU pools with ENV, WORKDIR, COPY and apt-get through the package proxy the test runs
// (forwarded onto the builders' network by anvil dev --package-proxy), publishes one index,
// and a Machine booting it has the package, over SSH. Then a package that does not exist:
// the step fails naming its line, the index stays, the builder is gone.
func TestDebianOSImageBuildsWithAptThroughThePackageProxy(t *testing.T) {
	proxy := startPackageProxy(t)
	kubeconfig, registry := startDevForBuilds(t, proxy.Addr)
	apply(t, kubeconfig, builderClass)

	start := time.Now()
	apply(t, kubeconfig, recipeYAML(registry, "[]", "hello"))
	o := waitOSImage(t, kubeconfig, 100*time.Minute, "published for both architectures", imagesv1alpha1.ReasonBuildFailed, func(o *imagesv1alpha1.OSImage) bool {
		c := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionReady)
		return c != nil && c.Status == "True" && o.Status.Index != "" && len(o.Status.Published) == 2
	})
	t.Logf("OSImage created → index published (amd64 and arm64): %v", time.Since(start).Round(time.Second))
	logBuildTimes(t, kubeconfig, o.Status.LatestBuild)
	for _, arch := range testos.Architectures {
		if !proxyServed(proxy, "/pool/main/h/hello/hello_", "_"+string(arch)+".deb") {
			t.Errorf("the package proxy never served hello for %s: %v", arch, proxy.Requests())
		}
	}
	waitBuildersGone(t, kubeconfig)

	// The output boots, with the package and the steps' files. One architecture: each boot
	// under TCG costs minutes, and both were built the same way.
	arch := computev1alpha1.ArchitectureAMD64
	id := createVM(t, kubeconfig, arch, registry+"/default/debian-hello:1")
	c := login(t, kubeconfig, "debian-"+string(arch), id)
	for _, check := range []struct{ command, want string }{
		{"hello", "Hello, world!"},
		{"dpkg-query -W -f '${Status}' hello", "install ok installed"},
		{"cat /opt/anvil/built", "built for amd64 in /opt/anvil"},
		{"cat /opt/anvil/notes.txt", "copied from the context"},
		{"cloud-init status --wait", "status: done"},
		{"uname -m", testos.UnameMachine(arch)},
	} {
		out, err := guestssh.Run(c, check.command)
		if err != nil || !strings.Contains(out, check.want) {
			t.Errorf("%q = %q (%v), want it to say %q", check.command, strings.TrimSpace(out), err, check.want)
		}
	}
	c.Close()

	// A package that does not exist: StepFailed naming line 6, the index untouched.
	apply(t, kubeconfig, recipeYAML(registry, "[amd64]", "anvil-no-such-package"))
	failed := waitOSImage(t, kubeconfig, 60*time.Minute, "the failed build", "", func(o *imagesv1alpha1.OSImage) bool {
		c := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionReady)
		return c != nil && c.Reason == imagesv1alpha1.ReasonBuildFailed
	})
	if failed.Status.Index != o.Status.Index {
		t.Errorf("index %s after the failed build, want it untouched (%s)", failed.Status.Index, o.Status.Index)
	}
	b := getBuild(t, kubeconfig, failed.Status.LatestBuild)
	want := "line 6: RUN apt-get update && apt-get install -y anvil-no-such-package: exited with status 100"
	if len(b.Status.Architectures) != 1 || b.Status.Architectures[0].Reason != "StepFailed" || !strings.Contains(b.Status.Architectures[0].Message, want) {
		t.Errorf("build status %+v, want amd64 StepFailed saying %q", b.Status.Architectures, want)
	}
	if tag, _ := env.Kubectl(t, kubeconfig, "", "get", "osimage", "debian-hello", "-o", "jsonpath={.status.index}"); tag != o.Status.Index {
		t.Errorf("status.index %q, want %q", tag, o.Status.Index)
	}
	waitBuildersGone(t, kubeconfig)
}

// startPackageProxy runs the test's package proxy for Debian's archive, keeping packages
// in ~/.cache/anvil/pkgproxy across runs.
func startPackageProxy(t *testing.T) *pkgproxy.Proxy {
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

// startDevForBuilds starts anvil dev with its QEMU pools, the builder image (the test OS
// with agents built from this checkout), the package proxy and the Debian image (--debian:
// anvil/debian:12 is the disk form), and creates the VMs' class; it returns the kubeconfig
// and registry.
func startDevForBuilds(t *testing.T, packageProxy string) (kubeconfig, registry string) {
	t.Helper()
	state, err := os.MkdirTemp("", "db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	t.Cleanup(func() { devproc.KillQemu(state) })
	port := devproc.FreePort(t)
	testos.DebianDisk(t) // fails loudly, naming make debian, when it is missing
	testos.DebianRAM(t)
	d := env.StartDev(t, "--state-dir", state, "--bin-dir", env.BinDir, "--fake-pool", "",
		"--apiserver-port", devproc.FreePort(t), "--etcd-port", devproc.FreePort(t), "--etcd-peer-port", devproc.FreePort(t),
		"--registry-port", port, "--metal-pool=false", "--test-os", testos.Dir(t), "--agents", buildAgents(t),
		"--debian", filepath.Join(env.BinDir, "debian"), "--package-proxy", packageProxy)
	t.Cleanup(func() { d.Stop(syscall.SIGTERM) })
	kubeconfig = filepath.Join(state, "kubeconfig")
	registry = "127.0.0.1:" + port
	apply(t, kubeconfig, vmClass)
	return kubeconfig, registry
}

// buildAgents builds anvil-build-agent from this checkout for each architecture, laid out
// as make agents lays out bin/build-agent. (This package imports buildagent, so go test's
// cache does not keep a result across a change of the agent's code.)
func buildAgents(t *testing.T) string {
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

func recipeYAML(registry, archs, pkg string) string {
	return strings.NewReplacer("REGISTRY", registry, "ARCHS", archs, "PACKAGE", pkg).Replace(buildRecipe)
}

func getOSImage(t *testing.T, kubeconfig string) *imagesv1alpha1.OSImage {
	t.Helper()
	out, err := env.Kubectl(t, kubeconfig, "", "get", "osimage", "debian-hello", "-n", "default", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get osimage: %v\n%s", err, out)
	}
	o := &imagesv1alpha1.OSImage{}
	if err := json.Unmarshal([]byte(out), o); err != nil {
		t.Fatal(err)
	}
	return o
}

func getBuild(t *testing.T, kubeconfig, name string) *imagesv1alpha1.OSImageBuild {
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

// waitOSImage polls the OSImage until done says so; it fails the test after limit, or at
// once when Ready's reason is stop, with the OSImage's conditions and its latest build's
// state.
func waitOSImage(t *testing.T, kubeconfig string, limit time.Duration, what, stop string, done func(*imagesv1alpha1.OSImage) bool) *imagesv1alpha1.OSImage {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		o := getOSImage(t, kubeconfig)
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
			t.Fatalf("OSImage %s: not within %v; last seen:\n%s", what, limit, state)
		}
		time.Sleep(10 * time.Second)
	}
}

// logBuildTimes logs each architecture's builder time (start to completion) and the agent's
// own lines of its log, each stamped with the time since the agent began: where the
// minutes went.
func logBuildTimes(t *testing.T, kubeconfig, build string) {
	t.Helper()
	b := getBuild(t, kubeconfig, build)
	for _, a := range b.Status.Architectures {
		if a.StartTime != nil && a.CompletionTime != nil {
			t.Logf("%s: %s in %v (%d attempt(s))", a.Architecture, a.Phase, a.CompletionTime.Sub(a.StartTime.Time), a.Attempts)
		}
		for _, in := range b.Spec.Architectures {
			if in.Architecture != a.Architecture {
				continue
			}
			_, log, err := buildagent.ReadResult(context.Background(), b.Spec.Output.Repository, imagebuild.LogTag(string(in.Architecture), in.InputHash, a.Attempts), 1<<20)
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

func waitBuildersGone(t *testing.T, kubeconfig string) {
	t.Helper()
	env.WaitKubectlFor(t, kubeconfig, 3*time.Minute, "builders deleted", func(s string) bool { return strings.TrimSpace(s) == "" },
		"get", "machines", "-n", "default", "-l", imagesv1alpha1.LabelOSImage+"=debian-hello", "-o", "name")
}
