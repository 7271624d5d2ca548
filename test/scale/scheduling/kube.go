package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

// kubeSide is kube-scheduler with Nodes that exist only as API objects (no kubelet):
// capacity, allocatable and a Ready condition in their status.
type kubeSide struct {
	o         options
	c         client.WithWatch
	scheduler *controlplane.Process
	dir       string
}

func newKubeSide(ctx context.Context, env *harness.Env, o options) (*kubeSide, error) {
	c, err := fastClient(env)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "anvil-kube-scheduler-")
	if err != nil {
		return nil, err
	}
	s := &kubeSide{o: o, c: c, dir: dir}
	if err := s.createNodes(ctx); err != nil {
		return nil, err
	}
	if err := s.startScheduler(env); err != nil {
		return nil, err
	}
	if _, err := s.bindBatch(ctx, "kube-warmup", 1); err != nil {
		s.stop()
		return nil, fmt.Errorf("warm-up (kube-scheduler log %s): %w", filepath.Join(dir, "kube-scheduler.log"), err)
	}
	return s, nil
}

func (s *kubeSide) createNodes(ctx context.Context) error {
	_, _, err := measure.CreateAll(ctx, s.c, s.o.targets, s.o.creators, func(i int) client.Object {
		name := fmt.Sprintf("node-%04d", i)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}}}
	})
	if err != nil {
		return err
	}
	return measure.ForEach(s.o.targets, s.o.creators, func(i int) error {
		n := &corev1.Node{}
		if err := s.c.Get(ctx, client.ObjectKey{Name: fmt.Sprintf("node-%04d", i)}, n); err != nil {
			return err
		}
		n.Status.Capacity, n.Status.Allocatable = bigTarget(), bigTarget()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "Benchmark", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if err := s.c.Status().Update(ctx, n); err != nil {
			return err
		}
		// Admission taints new Nodes not-ready; with no node controller to lift the taint
		// once the Node is Ready, the benchmark lifts it as that controller would.
		n.Spec.Taints = nil
		return s.c.Update(ctx, n)
	})
}

// startScheduler runs kube-scheduler with its client limits raised to anvil's, as its own
// documentation says to configure it for throughput; percentageOfNodesToScore is default.
func (s *kubeSide) startScheduler(env *harness.Env) error {
	bin, err := harness.AssetsDir()
	if err != nil {
		return err
	}
	kubeconfig, err := env.AdminKubeconfig("kube-scheduler-bench")
	if err != nil {
		return err
	}
	kcPath := filepath.Join(s.dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: %v
  burst: %d
leaderElection:
  leaderElect: false
`, kcPath, s.o.qps, s.o.burst)
	cfgPath := filepath.Join(s.dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	s.scheduler, err = controlplane.StartProcess("kube-scheduler", filepath.Join(bin, "kube-scheduler"),
		[]string{"--config", cfgPath, "--secure-port", "0", "-v", "1"}, s.dir, "")
	return err
}

func (s *kubeSide) round(ctx context.Context, round int) (sideResult, error) {
	return s.bindBatch(ctx, fmt.Sprintf("kube-round-%d", round), s.o.objects)
}

func (s *kubeSide) bindBatch(ctx context.Context, ns string, n int) (sideResult, error) {
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		// No controller-manager runs to create it, and Pod admission requires it.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}},
	} {
		if err := s.c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			return sideResult{}, err
		}
	}
	bw, err := measure.StartWatch(ctx, s.c, ns, func() client.ObjectList { return &corev1.PodList{} }, func(o client.Object) bool {
		return o.(*corev1.Pod).Spec.NodeName != ""
	})
	if err != nil {
		return sideResult{}, err
	}
	defer bw.Stop()
	first, lastCreate, err := measure.CreateAll(ctx, s.c, n, s.o.creators, func(i int) client.Object {
		cpu, mem := classSize(i % numClasses)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%05d", i)},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/os:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						"cpu": *resource.NewQuantity(int64(cpu), resource.DecimalSI), "memory": resource.MustParse(fmt.Sprintf("%dGi", mem))}}}},
			},
		}
	})
	if err != nil {
		return sideResult{}, err
	}
	lastBound, err := bw.Wait(ctx, n, s.o.timeout)
	if err != nil {
		return sideResult{}, err
	}
	return result(n, first, lastCreate, lastBound), nil
}

func (s *kubeSide) stop() {
	s.scheduler.Kill()
}
