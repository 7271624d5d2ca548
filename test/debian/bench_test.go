package debian

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/guestssh"
	"github.com/anvil-dev/anvil/test/testos"
)

// BenchmarkFirstBootAgainstQEMUByHand: for each architecture, a Debian Machine from its
// creation until SSH lets the user in and cloud-init says done, against the very QEMU
// command line the runtime ran (read from /proc), run by hand with a copy of the same seed
// and a fresh overlay on the same cached disk, timed the same way. One VM runs at a time.
// Reported: seconds each way and their ratio (anvil / by hand) per architecture.
//
//	go test -run '^$' -bench FirstBoot -benchtime 1x -timeout 60m ./test/debian
func BenchmarkFirstBootAgainstQEMUByHand(b *testing.B) {
	d := startDevWithDebian(b, false)
	kubeconfig, image := d.kubeconfig, d.disk
	for i := 0; i < b.N; i++ {
		for _, arch := range testos.Architectures {
			name := "debian-" + string(arch)
			start := time.Now()
			id := createVM(b, kubeconfig, arch, image)
			c := env.Login(b, kubeconfig, name, id)
			waitCloudInit(b, c)
			anvil := time.Since(start)
			c.Close()

			args, machineDir := runtimeCommandLine(b, kubeconfig, name)
			hand := copyMachine(b, machineDir)
			if out, err := env.Kubectl(b, kubeconfig, "", "delete", "machine", name, "--timeout", "3m"); err != nil {
				b.Fatalf("kubectl delete: %v\n%s", err, out)
			}
			byHand := bootByHand(b, rewriteArgs(b, args, machineDir, hand), hand, id)
			b.ReportMetric(anvil.Seconds(), "s-anvil-"+string(arch))
			b.ReportMetric(byHand.Seconds(), "s-byhand-"+string(arch))
			b.ReportMetric(anvil.Seconds()/byHand.Seconds(), "ratio-"+string(arch))
			b.Logf("%s: anvil %s, QEMU by hand %s, ratio %.2f", arch, anvil.Round(time.Second), byHand.Round(time.Second), anvil.Seconds()/byHand.Seconds())
		}
	}
}

// waitCloudInit waits, logged in as c, until cloud-init has finished, and fails unless it
// ended done.
func waitCloudInit(tb testing.TB, c *ssh.Client) {
	tb.Helper()
	if out, err := guestssh.Run(c, "cloud-init status --wait"); err != nil || !strings.Contains(out, "status: done") {
		tb.Fatalf("cloud-init status --wait = %q (%v), want done", strings.TrimSpace(out), err)
	}
}

// runtimeCommandLine reads the running QEMU's command line of Machine name and the folder
// the runtime keeps its files in.
func runtimeCommandLine(tb testing.TB, kubeconfig, name string) (args []string, machineDir string) {
	tb.Helper()
	machineDir = env.QemuMachineDir(tb, kubeconfig, filepath.Dir(kubeconfig), "default", name) // anvil dev's kubeconfig is in its state folder
	pids := devproc.QemuProcesses(machineDir)
	if len(pids) != 1 {
		tb.Fatalf("%s: QEMU processes %v for %s, want one", name, pids, machineDir)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0]))
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), machineDir
}

// copyMachine copies what QEMU reads from the machine's folder (the seed, first-boot
// files) into a new short folder, and makes each disk overlay anew on its backing file with
// its size: the by-hand boot starts from the same bytes the runtime's did.
func copyMachine(tb testing.TB, machineDir string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "dq")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	err = filepath.Walk(machineDir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(machineDir, path)
		to := filepath.Join(dir, rel)
		switch {
		case info.IsDir():
			return os.MkdirAll(to, 0o755)
		case !info.Mode().IsRegular(), strings.HasSuffix(path, ".log"), strings.HasSuffix(path, ".pid"):
			return nil // sockets, the console and QEMU's log and pid: QEMU makes its own
		case strings.HasSuffix(path, ".qcow2"):
			return newOverlay(path, to)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// newOverlay makes at to an empty qcow2 overlay with the backing file and size of the one
// at from.
func newOverlay(from, to string) error {
	out, err := exec.Command("qemu-img", "info", "--output=json", "-U", from).Output()
	if err != nil {
		return fmt.Errorf("qemu-img info %s: %w", from, err)
	}
	var info struct {
		VirtualSize   int64  `json:"virtual-size"`
		Backing       string `json:"full-backing-filename"`
		BackingFormat string `json:"backing-filename-format"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return err
	}
	args := []string{"create", "-q", "-f", "qcow2"}
	if info.Backing != "" {
		args = append(args, "-b", info.Backing, "-F", info.BackingFormat)
	}
	args = append(args, to, fmt.Sprint(info.VirtualSize))
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img %v: %w: %s", args, err, out)
	}
	return os.Chmod(to, 0o666) // QEMU drops to its unprivileged user (-runas) before it writes
}

var hostfwd = regexp.MustCompile(`hostfwd=tcp:127\.0\.0\.1:[0-9]+-:22`)

// rewriteArgs points the runtime's command line at the copy and at a free SSH port.
func rewriteArgs(tb testing.TB, args []string, machineDir, hand string) []string {
	tb.Helper()
	out := make([]string, len(args))
	for i, a := range args {
		a = strings.ReplaceAll(a, machineDir, hand)
		out[i] = hostfwd.ReplaceAllString(a, "hostfwd=tcp:127.0.0.1:"+devproc.FreePort(tb)+"-:22")
	}
	return out
}

// bootByHand starts QEMU with args and returns how long until id logs in at the new SSH
// port and cloud-init is done; QEMU is killed afterwards.
func bootByHand(tb testing.TB, args []string, hand string, id *guestssh.Identity) time.Duration {
	tb.Helper()
	var addr string
	for _, a := range args {
		if m := hostfwd.FindString(a); m != "" {
			addr = strings.TrimSuffix(strings.TrimPrefix(m, "hostfwd=tcp:"), "-:22")
		}
	}
	if addr == "" {
		tb.Fatalf("no SSH forward in the runtime's command line %q", args)
	}
	start := time.Now()
	cmd := exec.Command(args[0], args[1:]...)
	log, err := os.Create(filepath.Join(hand, "by-hand.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c, err := id.Dial(ctx, addr)
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(hand, "by-hand.log"))
		tb.Fatalf("QEMU by hand: %v\n%s", err, b)
	}
	defer c.Close()
	waitCloudInit(tb, c)
	return time.Since(start)
}
