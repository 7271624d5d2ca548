package cluster

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// helperDirEnv makes the test binary run TestKilledRunHelper: a node in that folder with a
// Pod running, until it is killed.
const helperDirEnv = "ANVIL_TEST_CLUSTER_HELPER_DIR"

// A run SIGKILLed with a Pod running leaves containerd's shim and the Pod's processes (the
// rest die with it), cni0, rules and sysctls; the next Start stops those processes and
// restores the host first, and its own Stop leaves the host as before the killed run.
func TestStartAfterKilledRun(t *testing.T) {
	ctx := context.Background()
	killedDir := t.TempDir()
	before, err := takeSnapshot(killedDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestKilledRunHelper$", "-test.v")
	helper.Env = append(os.Environ(), helperDirEnv+"="+killedDir)
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	ready := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		t.Log("helper: " + sc.Text())
		if sc.Text() == "POD RUNNING" {
			ready = true
			break
		}
	}
	_ = helper.Process.Signal(syscall.SIGKILL)
	_ = helper.Wait()
	if !ready {
		t.Fatal("the helper run ended before its Pod ran")
	}
	if len(NamingDir(killedDir)) == 0 {
		t.Fatal("the killed run left no process behind: this test would prove nothing")
	}
	if _, err := os.Stat(SnapshotPath); err != nil {
		t.Fatalf("the killed run left no snapshot: %v", err)
	}

	c, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if left := NamingDir(killedDir); len(left) > 0 {
		t.Errorf("processes of the killed run survived the next Start:\n%s", strings.Join(left, "\n"))
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := before.diff(); len(d) > 0 {
		t.Errorf("the host differs from before the killed run:\n%s", strings.Join(d, "\n"))
	}
}

// TestKilledRunHelper is the run TestStartAfterKilledRun kills: it starts a node in
// $ANVIL_TEST_CLUSTER_HELPER_DIR, runs a Pod of the pause image, prints "POD RUNNING" and
// waits to be killed. Without the variable it does nothing.
func TestKilledRunHelper(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		return
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "pause", Image: PauseImage, ImagePullPolicy: corev1.PullNever,
		}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := waitPod(ctx, cs, "default", "sleeper", 2*time.Minute, corev1.PodRunning); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("POD RUNNING\n")
	time.Sleep(10 * time.Minute)
}
