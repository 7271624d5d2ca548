package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// BenchmarkNode prints a node's figures (docs/benchmarks.md, "Test cluster"): Start until
// the Node is Ready (Start returns then), a first Pod pulled from a registry on 127.0.0.1
// until Running, and Stop with its restore. Each step of Start is logged.
func BenchmarkNode(b *testing.B) {
	ctx := context.Background()
	image := pushProbe(b, ctx)
	var ready, pod, stop time.Duration
	for i := 0; i < b.N; i++ {
		started := time.Now()
		c, err := Start(ctx, Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		ready += time.Since(started)
		for _, p := range c.phases {
			b.Logf("run %d: %-27s %s", i, p.name, p.took.Round(time.Millisecond))
		}
		cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
		created := time.Now()
		if _, err := cs.CoreV1().Pods("default").Create(ctx, probePod("first", image, false, "sleep"), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := waitPod(ctx, cs, "default", "first", 2*time.Minute, corev1.PodRunning); err != nil {
			b.Fatal(err)
		}
		pod += time.Since(created)
		stopping := time.Now()
		if err := c.Stop(); err != nil {
			b.Fatal(err)
		}
		stop += time.Since(stopping)
	}
	n := float64(b.N)
	b.ReportMetric(ready.Seconds()/n, "s-start-to-ready")
	b.ReportMetric((ready+pod).Seconds()/n, "s-start-to-first-pod-running")
	b.ReportMetric(pod.Seconds()/n, "s-pod-create-to-running")
	b.ReportMetric(stop.Seconds()/n, "s-stop")
	b.ReportMetric(0, "ns/op")
}
