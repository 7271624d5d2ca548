package debian

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/guestssh"
	"github.com/anvil-dev/anvil/test/scale/measure"
	"github.com/anvil-dev/anvil/test/testos"
)

// BenchmarkOnePackageChangeAgainstABuildByHand (docs/benchmarks.md, "The Debian image"): a one-package change
// to the Debian OSImage of build_test.go (its RUN apt-get line installs "hello tree"
// instead of "hello", or back, so every iteration is a change) → a new index published
// with both architectures, against the same build done by hand, one architecture at a
// time. Same anvil dev, package proxy and cached Debian disk for both; one run.
//
// anvil: the clock starts as the changed OSImage is applied and stops when status.index
// has moved and both architectures are published (polled every 10 s). amd64 and arm64
// build at once, each on a TCG builder of its own architecture (1 vCPU, 2 GiB): the
// machine's two cores bound it. The builder runs the steps in a chroot on the base disk
// and writes a compressed qcow2 (deflate, inside the guest, under TCG).
//
// By hand, for amd64 then arm64, nothing else of the benchmark running: the very QEMU
// command line anvil's runtime ran for a Debian VM on anvil/debian:12 (1 vCPU, 1 GiB),
// on a fresh overlay of the same cached disk with the same seed, its user network open
// (the runtime's is restrict=on, cut off from the host) so that 10.0.2.2 is the host's
// loopback, where the package proxy is: the shortest path a guest has to it. The clock
// runs from QEMU's start through the boot, cloud-init done, the recipe's steps over SSH
// (its files, then apt-get update and install through the proxy), poweroff, QEMU's exit,
// and qemu-img convert -c of the root overlay with its backing chain into one compressed
// qcow2, run on the host: what anvil publishes, less the push (and with the free blocks
// the builder leaves out: 418 MiB for amd64 against its 258 MB layer). Each build by hand
// boots Debian, which anvil's builder does not; it has both cores to itself, which anvil's
// two builders share.
//
// Reported (medians over the iterations; each iteration logged): s-anvil (both
// architectures), s-byhand-amd64, s-byhand-arm64, and ratio = anvil / the slower build by
// hand.
//
//	go test -run '^$' -bench OnePackageChange -benchtime 1x -timeout 150m ./test/debian
func BenchmarkOnePackageChangeAgainstABuildByHand(b *testing.B) {
	proxy := startPackageProxy(b)
	kubeconfig, registry := startDevForBuilds(b, proxy.Addr)
	env.Apply(b, kubeconfig, builderClass)
	env.Apply(b, kubeconfig, recipeYAML(registry, "[]", "hello"))
	index := waitPublished(b, kubeconfig, "debian-hello", "").Status.Index
	waitBuildersGone(b, kubeconfig)

	_, proxyPort, err := net.SplitHostPort(proxy.Addr)
	if err != nil {
		b.Fatal(err)
	}
	hands := map[computev1alpha1.Architecture]*handMachine{}
	for _, arch := range testos.Architectures {
		hands[arch] = keepMachine(b, kubeconfig, arch, registry+"/"+dev.DebianRepository)
	}

	var anvils, ratios []float64
	byHand := map[computev1alpha1.Architecture][]float64{}
	for i := 0; i < b.N; i++ {
		packages := []string{"hello tree", "hello"}[i%2]
		start := time.Now()
		env.Apply(b, kubeconfig, recipeYAML(registry, "[]", packages))
		o := waitPublished(b, kubeconfig, "debian-hello", index)
		anvil := time.Since(start)
		index = o.Status.Index
		logBuildTimes(b, kubeconfig, o.Status.LatestBuild)
		waitBuildersGone(b, kubeconfig) // nothing of anvil's runs beside the builds by hand

		var slowest time.Duration
		words := []string{fmt.Sprintf("%q: anvil %s (both architectures)", packages, anvil.Round(time.Second))}
		for _, arch := range testos.Architectures {
			took := hands[arch].build(b, proxyPort, packages)
			slowest = max(slowest, took)
			byHand[arch] = append(byHand[arch], took.Seconds())
			words = append(words, fmt.Sprintf("by hand %s %s", arch, took.Round(time.Second)))
		}
		anvils = append(anvils, anvil.Seconds())
		ratios = append(ratios, anvil.Seconds()/slowest.Seconds())
		b.Logf("%s; ratio to the slower by hand %.2f", strings.Join(words, ", "), anvil.Seconds()/slowest.Seconds())
	}
	b.ReportMetric(measure.Median(anvils), "s-anvil")
	for _, arch := range testos.Architectures {
		b.ReportMetric(measure.Median(byHand[arch]), "s-byhand-"+string(arch))
	}
	b.ReportMetric(measure.Median(ratios), "ratio")
}

// handMachine is what a build by hand of one architecture starts from: the QEMU command
// line the runtime ran for a Debian VM, and a copy of the folder it ran in (the Machine
// itself deleted).
type handMachine struct {
	arch       computev1alpha1.Architecture
	args       []string // the runtime's, its user network opened
	machineDir string   // the runtime's folder, as args name it
	kept       string   // the copy: its seed, and overlays on the cached disk
	id         *guestssh.Identity
}

// keepMachine boots a Debian VM of arch on image, keeps its command line and a copy of its
// folder, and deletes it.
func keepMachine(tb testing.TB, kubeconfig string, arch computev1alpha1.Architecture, image string) *handMachine {
	tb.Helper()
	name := "debian-" + string(arch)
	id := createVM(tb, kubeconfig, arch, image)
	env.Login(tb, kubeconfig, name, id).Close() // it boots: the command line is a good one
	args, machineDir := runtimeCommandLine(tb, kubeconfig, name)
	m := &handMachine{arch: arch, args: openUserNetwork(tb, args), machineDir: machineDir, kept: copyMachine(tb, machineDir), id: id}
	if out, err := env.Kubectl(tb, kubeconfig, "", "delete", "machine", name, "--timeout", "3m"); err != nil {
		tb.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	return m
}

// openUserNetwork drops restrict=on from the command line's user networks, so the guest
// reaches the host's loopback at 10.0.2.2 as a VM started by hand would. It fails unless
// the guest has a user network.
func openUserNetwork(tb testing.TB, args []string) []string {
	tb.Helper()
	out := slices.Clone(args)
	user := false
	for i := 1; i < len(out); i++ {
		if out[i-1] != "-netdev" {
			continue
		}
		if !strings.HasPrefix(out[i], "user,") {
			tb.Fatalf("the runtime's -netdev %q is not QEMU's user network", out[i])
		}
		user = true
		out[i] = strings.Replace(out[i], ",restrict=on", "", 1)
	}
	if !user {
		tb.Fatalf("no -netdev in the runtime's command line %q", args)
	}
	return out
}

// build builds the recipe with packages by hand on a fresh copy of m (see the benchmark)
// and returns the time from QEMU's start to the compressed qcow2 written.
func (m *handMachine) build(tb testing.TB, proxyPort, packages string) time.Duration {
	tb.Helper()
	hand := copyMachine(tb, m.kept)
	args := rewriteArgs(tb, m.args, m.machineDir, hand)
	root, addr := rootOverlay(tb, args, hand), sshForward(tb, args)
	built := filepath.Join(hand, "built.qcow2")
	logPath := filepath.Join(hand, "by-hand.log")
	log, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer log.Close()

	start := time.Now()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited, running := make(chan error, 1), true
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if running { // the build failed
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c, err := m.id.Dial(ctx, addr)
	if err != nil {
		b, _ := os.ReadFile(logPath)
		tb.Fatalf("%s by hand: %v\n%s", m.arch, err, b)
	}
	defer c.Close()
	waitCloudInit(tb, c)
	booted := time.Now()
	proxy := "DEBIAN_FRONTEND=noninteractive http_proxy=http://10.0.2.2:" + proxyPort
	for _, step := range []string{
		// ENV, WORKDIR, COPY and the echo of the recipe
		fmt.Sprintf(`sudo mkdir -p /opt/anvil && cd /opt/anvil && echo "copied from the context" | sudo tee notes.txt >/dev/null && echo "built for %s in $(pwd)" | sudo tee built >/dev/null`, m.arch),
		"sudo env " + proxy + " apt-get update && sudo env " + proxy + " apt-get install -y " + packages,
	} {
		if out, err := guestssh.Run(c, step); err != nil {
			tb.Fatalf("%s by hand: %q: %v\n%s", m.arch, step, err, devproc.LastLines(out, 40))
		}
	}
	stepped := time.Now()
	_, _ = guestssh.Run(c, "sudo poweroff") // the connection may end with the guest
	select {
	case <-exited:
		running = false
	case <-time.After(5 * time.Minute):
		tb.Fatalf("%s by hand: QEMU still running 5 minutes after poweroff", m.arch)
	}
	off := time.Now()
	if out, err := exec.Command("qemu-img", "convert", "-c", "-O", "qcow2", root, built).CombinedOutput(); err != nil {
		tb.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	took := time.Since(start)
	out, err := exec.Command("qemu-img", "info", "--output=json", built).Output()
	var info struct {
		Format      string `json:"format"`
		Backing     string `json:"backing-filename"`
		VirtualSize int64  `json:"virtual-size"`
		ActualSize  int64  `json:"actual-size"`
	}
	if err == nil {
		err = json.Unmarshal(out, &info)
	}
	if err != nil || info.Format != "qcow2" || info.Backing != "" {
		tb.Fatalf("%s by hand: qemu-img info %s: %v %+v, want one qcow2 file", m.arch, built, err, info)
	}
	tb.Logf("%s by hand: %q installed, %d MiB written (a %d GiB disk) in %s: boot and cloud-init %s, the steps %s, poweroff %s, qemu-img convert %s",
		m.arch, packages, info.ActualSize>>20, info.VirtualSize>>30, took.Round(time.Second), booted.Sub(start).Round(time.Second),
		stepped.Sub(booted).Round(time.Second), off.Sub(stepped).Round(time.Second), start.Add(took).Sub(off).Round(time.Second))
	return took
}

// rootOverlay is the qcow2 disk in the folder hand that args boot from and that has a
// backing file: the root, an overlay on the image's disk (a data volume has none).
func rootOverlay(tb testing.TB, args []string, hand string) string {
	tb.Helper()
	var disks []string
	for i := 1; i < len(args); i++ {
		if args[i-1] != "-blockdev" {
			continue
		}
		var node struct {
			Driver string `json:"driver"`
			File   struct {
				Filename string `json:"filename"`
			} `json:"file"`
		}
		if err := json.Unmarshal([]byte(args[i]), &node); err != nil {
			tb.Fatalf("-blockdev %s: %v", args[i], err)
		}
		if node.Driver == "qcow2" && strings.HasPrefix(node.File.Filename, hand+"/") && hasBacking(tb, node.File.Filename) {
			disks = append(disks, node.File.Filename)
		}
	}
	if len(disks) != 1 {
		tb.Fatalf("qcow2 overlays %v in %s, want one (the root)", disks, hand)
	}
	return disks[0]
}

// hasBacking says whether the qcow2 file at path has a backing file.
func hasBacking(tb testing.TB, path string) bool {
	tb.Helper()
	out, err := exec.Command("qemu-img", "info", "--output=json", "-U", path).Output()
	if err != nil {
		tb.Fatalf("qemu-img info %s: %v", path, err)
	}
	var info struct {
		Backing string `json:"backing-filename"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		tb.Fatal(err)
	}
	return info.Backing != ""
}

// sshForward is the host address of the guest's SSH forward in args.
func sshForward(tb testing.TB, args []string) string {
	tb.Helper()
	for _, a := range args {
		if m := hostfwd.FindString(a); m != "" {
			return strings.TrimSuffix(strings.TrimPrefix(m, "hostfwd=tcp:"), "-:22")
		}
	}
	tb.Fatalf("no SSH forward in the command line %q", args)
	return ""
}
