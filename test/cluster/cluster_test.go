package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/anvil-dev/anvil/internal/registry"
)

// offMachine is an address of TEST-NET-3, off this machine: a Pod must never reach it.
const offMachine = "203.0.113.1:80"

// hostPathVolume is the host folder the test's DaemonSet writes, as anvil's qemu runtime
// writes /run/anvil; Stop removes it (Options.HostPaths).
const hostPathVolume = "/run/anvil-test-cluster-hostpath"

// One node: Pods pull the probe from a registry on 127.0.0.1 and run on the Pod network
// and the host network, both reach the apiserver through the kubernetes Service, kubectl
// logs reads them, and a Pod's packets to an address off the machine (or to a service IP
// with no rule) are dropped by the guard. Stop leaves the host as it was before Start.
func TestNode(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	before, err := takeSnapshot(dir, []string{hostPathVolume})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(ctx, Options{Dir: dir, HostPaths: []string{hostPathVolume}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		}
	}()
	image := pushProbe(t, ctx)
	cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
	if d := before.diff(); len(d) == 0 {
		t.Error("the running node changed nothing the snapshot records: the restore check below would prove nothing")
	}

	t.Run("pod network", func(t *testing.T) {
		runPod(t, ctx, cs, probePod("apiserver", image, false, "apiserver"))
		if got := kubectlLogs(t, c, "apiserver"); got != "apiserver: user=system:serviceaccount:default:default" {
			t.Errorf("the Pod's probe printed %q, want the apiserver to name its service account", got)
		}
	})
	t.Run("host network", func(t *testing.T) {
		pod := runPod(t, ctx, cs, probePod("host", image, true, "apiserver"))
		if pod.Status.PodIP != c.NodeIP() {
			t.Errorf("the hostNetwork Pod's IP is %s, want the node address %s", pod.Status.PodIP, c.NodeIP())
		}
		if got := kubectlLogs(t, c, "host"); got != "apiserver: user=system:serviceaccount:default:default" {
			t.Errorf("the hostNetwork Pod's probe printed %q", got)
		}
	})
	t.Run("privileged hostNetwork DaemonSet with a hostPath", func(t *testing.T) {
		ds := probeDaemonSet(image)
		if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			got, err := cs.AppsV1().DaemonSets("default").Get(ctx, ds.Name, metav1.GetOptions{})
			if err == nil && got.Status.NumberAvailable == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("DaemonSet %s not available within 2 minutes: %+v (%v)", ds.Name, got.Status, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if raw, err := os.ReadFile(filepath.Join(hostPathVolume, "written")); err != nil || string(raw) != "probe" {
			t.Errorf("the DaemonSet's Pod wrote %q into its hostPath (%v), want \"probe\"", raw, err)
		}
	})
	t.Run("service to a pod", func(t *testing.T) {
		server := probePod("server", image, false, "serve", "8080")
		server.Labels = map[string]string{"app": "server"}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, server, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := waitPod(ctx, cs, "default", "server", 2*time.Minute, corev1.PodRunning); err != nil {
			t.Fatal(err)
		}
		svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: "default"},
			Spec:       corev1.ServiceSpec{Selector: server.Labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
		// From the host, once kube-proxy has the Service's endpoint...
		deadline := time.Now().Add(time.Minute)
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the host never reached Service %s: %v", addr, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// ...and from another Pod.
		runPod(t, ctx, cs, probePod("client", image, false, "dial", addr))
		if got, want := kubectlLogs(t, c, "client"), "dial "+addr+": connected"; got != want {
			t.Errorf("the client Pod printed %q, want %q", got, want)
		}
		// kubectl exec: the apiserver, the kubelet and containerd's stream server.
		apiserver := net.JoinHostPort(c.NodeIP(), "6443")
		out, err := exec.Command(filepath.Join(c.opts.BinDir, "kubectl"), "--kubeconfig", c.Kubeconfig(),
			"exec", "-n", "default", "server", "--", "/probe", "dial", apiserver).CombinedOutput()
		if got, want := strings.TrimSpace(string(out)), "dial "+apiserver+": connected"; err != nil || got != want {
			t.Errorf("kubectl exec printed %q (%v), want %q", got, err, want)
		}
	})
	t.Run("one node per machine", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := Start(short, Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), LockPath) {
			t.Errorf("a second Start while a node runs: err = %v, want one naming %s", err, LockPath)
		}
	})
	t.Run("egress guard", func(t *testing.T) {
		dropsBefore, err := GuardDrops()
		if err != nil {
			t.Fatal(err)
		}
		runPod(t, ctx, cs, probePod("egress", image, false, "dial", offMachine, "10.0.0.99:80"))
		logs := kubectlLogs(t, c, "egress")
		if strings.Contains(logs, "connected") {
			t.Errorf("a Pod reached an address it must not:\n%s", logs)
		}
		dropsAfter, err := GuardDrops()
		if err != nil {
			t.Fatal(err)
		}
		if dropsAfter <= dropsBefore {
			t.Errorf("the guard dropped %d packets before the Pod and %d after: its packets went elsewhere\n%s", dropsBefore, dropsAfter, logs)
		}
		// kube-proxy and the kubelet add their jumps later; the guard's must stay first.
		for _, chain := range []string{"FORWARD", "INPUT", "OUTPUT"} {
			out, err := exec.Command("iptables", "-w", "-S", chain).Output()
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) < 2 || !strings.HasSuffix(lines[1], "-j "+GuardChain) {
				t.Errorf("the first rule of %s is not the guard's:\n%s", chain, out)
			}
		}
	})

	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	if d := before.diff(); len(d) > 0 {
		t.Errorf("the host differs from before Start:\n%s", strings.Join(d, "\n"))
	}
	if left := NamingDir(dir); len(left) > 0 {
		t.Errorf("processes naming the run's folder survived Stop:\n%s", strings.Join(left, "\n"))
	}
	if _, err := os.Stat(SnapshotPath); !os.IsNotExist(err) {
		t.Errorf("the snapshot %s is still there after Stop (%v)", SnapshotPath, err)
	}
}

// pushProbe builds ./test/cluster/probe into an image and pushes it to a registry on
// 127.0.0.1, stopped when the test ends.
func pushProbe(t testing.TB, ctx context.Context) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probe")
	if err := BuildStatic("./test/cluster/probe", bin); err != nil {
		t.Fatal(err)
	}
	img, err := BinaryImage(bin)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Start(ctx, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	ref, err := name.NewTag(reg.Host+"/probe:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

func probePod(name, image string, hostNetwork bool, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			HostNetwork:   hostNetwork,
			Containers:    []corev1.Container{{Name: "probe", Image: image, Args: args}},
		},
	}
}

// probeDaemonSet runs the probe privileged on the host network with hostPathVolume at
// /host, as anvil's qemu runtime DaemonSet runs.
func probeDaemonSet(image string) *appsv1.DaemonSet {
	labels := map[string]string{"app": "probe"}
	privileged := true
	create := corev1.HostPathDirectoryOrCreate
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Containers: []corev1.Container{{
						Name: "probe", Image: image, Args: []string{"write", "/host/written"},
						SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
						VolumeMounts:    []corev1.VolumeMount{{Name: "host", MountPath: "/host"}},
					}},
					Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: hostPathVolume, Type: &create},
					}}},
				},
			},
		},
	}
}

// runPod creates pod and waits for it to succeed.
func runPod(t *testing.T, ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := waitPod(ctx, cs, pod.Namespace, pod.Name, 2*time.Minute, corev1.PodSucceeded)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitPod waits until the Pod reaches one of phases; Failed ends the wait with an error.
func waitPod(ctx context.Context, cs kubernetes.Interface, ns, name string, timeout time.Duration, phases ...corev1.PodPhase) (*corev1.Pod, error) {
	deadline := time.Now().Add(timeout)
	for {
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, p := range phases {
				if pod.Status.Phase == p {
					return pod, nil
				}
			}
			if pod.Status.Phase == corev1.PodFailed {
				return nil, fmt.Errorf("Pod %s failed: %+v", name, pod.Status)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("Pod %s not %v within %s: %+v (%v)", name, phases, timeout, pod.Status, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kubectlLogs reads a Pod's log with kubectl: through the apiserver to the kubelet.
func kubectlLogs(t *testing.T, c *Cluster, pod string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(c.opts.BinDir, "kubectl"), "--kubeconfig", c.Kubeconfig(), "logs", "-n", "default", pod).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl logs %s: %v: %s", pod, err, out)
	}
	return strings.TrimSpace(string(out))
}
