package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

const namespace = "scale"

type clients struct {
	c  client.WithWatch
	cs *kubernetes.Clientset
}

func newClients(env *harness.Env) (*clients, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{c: c, cs: cs}, nil
}

func (c *clients) seed(ctx context.Context) error {
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "small"},
			Capabilities: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")}},
	} {
		if err := c.c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (c *clients) waitPoolsReady(ctx context.Context, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		pools := &computev1alpha1.MachinePoolList{}
		if err := c.c.List(ctx, pools); err != nil {
			return err
		}
		ready := 0
		for _, p := range pools.Items {
			if meta.IsStatusConditionTrue(p.Status.Conditions, computev1alpha1.ConditionReady) && len(p.Status.SupportedClasses) > 0 {
				ready++
			}
		}
		if ready >= n {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("fewer than %d pools Ready after %s", n, limit)
}

// requestCounts is the apiserver's own count of requests, keyed by verb, resource,
// subresource and code, read from its metrics.
type requestCounts map[string]float64

func (c *clients) requestCounts(ctx context.Context) (requestCounts, error) {
	counts := requestCounts{}
	err := measure.ReadMetrics(ctx, c.cs.RESTClient(), []string{"apiserver_request_total", "apiserver_terminated_watchers_total"},
		func(name string, label func(string) string, v float64) {
			switch name {
			case "apiserver_terminated_watchers_total":
				// Watchers the apiserver closed because they fell behind.
				counts["TERMINATED "+label("resource")+"/ watch"] += v
			default:
				counts[fmt.Sprintf("%s %s/%s %s", label("verb"), label("resource"), label("subresource"), label("code"))] += v
			}
		})
	return counts, err
}

// since is what was counted after before was read.
func (after requestCounts) since(before requestCounts) requestCounts {
	d := requestCounts{}
	for k, v := range after {
		if v-before[k] > 0 {
			d[k] = v - before[k]
		}
	}
	return d
}

// machineWrites sums the successful writes (not creates) to Machines and their status, and
// the refused ones (conflicts), which change nothing but still cost the apiserver.
func (d requestCounts) machineWrites() (writes, refused float64) {
	for k, v := range d {
		f := strings.Fields(k)
		verb, resource, code := f[0], f[1], f[2]
		if !strings.HasPrefix(resource, "machines/") || (verb != "PATCH" && verb != "PUT" && verb != "APPLY") {
			continue
		}
		if code == "200" || code == "201" {
			writes += v
		} else {
			refused += v
		}
	}
	return writes, refused
}

// outcome is what createAndWait saw: when the first create was sent, the last returned and
// the last Machine was seen Running, and each Machine's create and Running times by name.
type outcome struct {
	first, lastCreate, lastRunning time.Time
	created, running               map[string]time.Time
}

// createAndWait creates the Machines and returns when the last is seen Running (or the
// time limit passed: then with what was seen, and an error).
func (c *clients) createAndWait(ctx context.Context, o options) (outcome, error) {
	var r outcome
	w, err := measure.StartWatch(ctx, c.c, namespace, func() client.ObjectList { return &computev1alpha1.MachineList{} }, func(obj client.Object) bool {
		return obj.(*computev1alpha1.Machine).Status.State == computev1alpha1.MachineStateRunning
	})
	if err != nil {
		return r, err
	}
	defer w.Stop()
	var created []time.Time
	r.first, r.lastCreate, created, err = measure.CreateAllTimed(ctx, c.c, o.machines, o.creators, func(i int) client.Object {
		return &computev1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: machineName(i)},
			Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
				Image: "registry.example/os@sha256:" + strings.Repeat("ab", 32)},
		}
	})
	r.created = map[string]time.Time{}
	for i, at := range created {
		if !at.IsZero() {
			r.created[machineName(i)] = at
		}
	}
	if err != nil {
		return r, err
	}
	r.lastRunning, err = w.Wait(ctx, o.machines, o.timeout)
	r.running = w.DoneAt()
	if err != nil {
		return r, fmt.Errorf("%w: %s", err, c.summary(ctx))
	}
	return r, nil
}

func machineName(i int) string { return fmt.Sprintf("m-%05d", i) }

// summary counts Machines by state and pool binding, to say where a run got stuck.
func (c *clients) summary(ctx context.Context) string {
	list := &computev1alpha1.MachineList{}
	if err := c.c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	counts := map[string]int{}
	for _, m := range list.Items {
		key := "state=" + string(m.Status.State)
		if m.Spec.MachinePoolRef == nil {
			key += ",unbound"
		}
		counts[key]++
	}
	return fmt.Sprint(counts)
}
