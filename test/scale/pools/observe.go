package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/watchstats"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

// The scenario's processes whose CPU time is read: envtest's two, the two children, and
// the scenario itself (its creators and its informer).
const (
	procAPIServer = "apiserver"
	procEtcd      = "etcd"
	procManager   = "manager"
	procPoollets  = "poollets"
	procScenario  = "scenario"
)

// cpuTimes are CPU seconds by process.
type cpuTimes map[string]float64

func readCPU(pids map[string]int) (cpuTimes, error) {
	out := cpuTimes{}
	for name, pid := range pids {
		s, err := measure.CPUSeconds(pid)
		if err != nil {
			return nil, fmt.Errorf("CPU time of %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// since is the CPU each process used after before, rounded to 0.1 s.
func (after cpuTimes) since(before cpuTimes) cpuTimes {
	d := cpuTimes{}
	for k, v := range after {
		d[k] = round1(v - before[k])
	}
	return d
}

// share is each process's CPU over a wall-clock span: 1.0 is one core busy.
func (d cpuTimes) share(span time.Duration) cpuTimes {
	s := cpuTimes{}
	for k, v := range d {
		s[k] = float64(int(100*v/span.Seconds()+0.5)) / 100
	}
	return s
}

func round1(v float64) float64 { return float64(int(10*v+0.5)) / 10 }

// envtestPIDs finds kube-apiserver and etcd, children of this process, and this process.
func envtestPIDs() (map[string]int, error) {
	pids := map[string]int{procScenario: os.Getpid()}
	for name, program := range map[string]string{procAPIServer: "kube-apiserver", procEtcd: "etcd"} {
		pid, err := measure.ChildPID(program)
		if err != nil {
			return nil, err
		}
		pids[name] = pid
	}
	return pids, nil
}

// metricsToken is the token of a ServiceAccount bound to the shipped anvil-metrics-reader
// ClusterRole, as a monitoring system would hold, to read the manager's metrics.
func metricsToken(ctx context.Context, env *harness.Env, c *clients) (string, error) {
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "anvil-system"}}); client.IgnoreAlreadyExists(err) != nil {
		return "", err
	}
	if err := env.InstallRBAC(ctx, ""); err != nil {
		return "", err
	}
	const sa = "scale-metrics"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scale-metrics"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: sa}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "anvil-metrics-reader"}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			return "", err
		}
	}
	tr, err := c.cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// informerMetrics are watchstats' metrics as a process serves them.
var informerMetrics = []string{"anvil_informer_relists_total", "anvil_informer_watch_ends_total"}

// watchCounts reads the watch ends and relists a process served at url, summed over its
// clients and kinds.
func watchCounts(ctx context.Context, url, token string) (watchstats.Counts, error) {
	c := watchstats.Counts{Ends: map[string]int64{}}
	err := measure.ReadMetricsURL(ctx, url, token, informerMetrics, func(name string, label func(string) string, v float64) {
		if name == "anvil_informer_relists_total" {
			c.Relists += int64(v)
		} else if v > 0 {
			c.Ends[label("reason")] += int64(v)
		}
	})
	return c, err
}

// apiserverWatchers are the watches the apiserver is serving now: of anvil's compute
// resources and Leases by resource (the ones that grow with the pools), and in all
// ("total", the apiserver's own informers included).
func (c *clients) apiserverWatchers(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	err := measure.ReadMetrics(ctx, c.cs.RESTClient(), []string{"apiserver_longrunning_requests"}, func(_ string, label func(string) string, v float64) {
		if label("verb") != "WATCH" || v == 0 {
			return
		}
		out["total"] += v
		if g := label("group"); g == computev1alpha1.GroupVersion.Group || g == coordinationv1.GroupName {
			out[label("resource")] += v
		}
	})
	return out, err
}

// watchCounts are the apiserver's counts of one kind (TERMINATED) during the run, by
// resource.
func (d requestCounts) watchCounts(kind string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range d {
		if rest, ok := strings.CutPrefix(k, kind+" "); ok {
			out[strings.TrimSuffix(rest, "/ watch")] += v
		}
	}
	return out
}

// machineEvents are the run's Machine changes (the successful creates and writes: one
// watch event each) and how many times they were queued to a watcher: the watch cache
// hands each change to every Machine watcher, whose selector then keeps or drops it (a
// custom resource's selectable field has no index there), the cost that grows with the
// pools.
type machineEvents struct {
	Changes float64 `json:"changes"`
	Queued  float64 `json:"queuedToWatchers"`
}

func (d requestCounts) machineEvents(watchers float64) machineEvents {
	writes, _ := d.machineWrites()
	changes := writes + d["POST machines/ 201"]
	return machineEvents{Changes: changes, Queued: changes * watchers}
}

// apiserverProfile writes a CPU profile of the apiserver over the next span to path.
func (c *clients) apiserverProfile(ctx context.Context, span time.Duration, path string) error {
	raw, err := c.cs.RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", fmt.Sprint(int(span.Seconds()))).Timeout(span + time.Minute).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("the apiserver's CPU profile: %w", err)
	}
	return os.WriteFile(path, raw, 0o644)
}
