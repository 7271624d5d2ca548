package capi_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
)

// benchMachines is the size of the benchmark's Cluster: one control-plane Machine and a
// MachineDeployment of the rest.
const benchMachines = 30

// BenchmarkCluster30 times a Cluster of 30 Machines on the rig's fake amd64 pool, from the
// first Cluster API object created to every Machine Running with a healthy Node, and counts
// the API writes each side sent for it: anvil's provider (and the rest of anvil, apart),
// against Cluster API's manager; and the provider's reconcile times. The Nodes are the
// test's stand-ins (startStandIns): a fake pool runs no guest, so nothing boots and no
// kubelet registers; a stand-in appears within 200 ms of its AnvilMachine being
// provisioned. Figures are printed (lines starting "capi-bench"), never asserted.
//
// Run it alone (-run '^$'): anvil's writes are counted on the clients the rig makes for its
// manager and poollets, so the benchmark must be what starts the rig.
func BenchmarkCluster30(b *testing.B) {
	r, counter := countingRig(b)
	capiMetrics := capiMetricsURL(b, r)
	mgmtHost := hostOf(b, env.Config.Host)
	workloadHost := hostOf(b, r.workload.RESTConfig().Host)
	apiserver, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	var pooled [2]*nativeHistogram // anvilmachine, anvilcluster: every iteration's reconciles
	var sum struct{ seconds, provider, anvil, poollets, capi float64 }
	b.StopTimer()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		waitQuiet(b, capiMetrics)
		ns := capienv.Namespace(b, env.Client, "capibench")
		startStandIns(b, r, ns)
		machines := watchMachines(b, ns)
		anvilBefore, capiBefore, recBefore, apiBefore := counter.snapshot(), scrapeCAPI(b, capiMetrics), reconcileTimes(b), apiserverWrites(b, apiserver)

		b.StartTimer()
		start := time.Now()
		cluster := newCluster(b, r, ns, "bench")
		newControlPlaneMachine(b, r, cluster, "cp-0", computev1alpha1.ArchitectureAMD64)
		md := newMachineDeployment(b, cluster, "workers", machineSpec(r, computev1alpha1.ArchitectureAMD64), "zone-a", benchMachines-1)
		end := machines.waitHealthy(b, benchMachines, 5*time.Minute)
		b.StopTimer()
		machines.w.Stop()
		// The writes that follow the last Machine's turn to healthy (statuses catching up)
		// belong to the Cluster too: the counts are read once every controller is at rest.
		waitQuiet(b, capiMetrics)
		anvilAfter, capiAfter, recAfter, apiAfter := counter.snapshot(), scrapeCAPI(b, capiMetrics), reconcileTimes(b), apiserverWrites(b, apiserver)
		checkOnPool(b, md)

		wall := end.Sub(start).Seconds()
		anvil := since(anvilAfter, anvilBefore)
		capi := since(capiAfter, capiBefore)
		perMachine := func(n int) float64 { return float64(n) / benchMachines }
		fmt.Printf("capi-bench wall: %d Machines (1 control plane + %d in one MachineDeployment, fake pool, stand-in Nodes made by the test, no guest boots) Running+NodeHealthy in %.1f s\n",
			benchMachines, benchMachines-1, wall)
		fmt.Printf("capi-bench writes/Machine: anvil provider %.2f, anvil rest of manager %.2f, anvil poollets %.2f; Cluster API manager %.2f (management %.2f, workload cluster %.2f)\n",
			perMachine(anvil.total("provider")), perMachine(anvil.total("manager-rest")), perMachine(anvil.total("poollet")),
			perMachine(capi.total(mgmtHost)+capi.total(workloadHost)), perMachine(capi.total(mgmtHost)), perMachine(capi.total(workloadHost)))
		fmt.Printf("capi-bench refused writes (409): anvil provider %d, anvil rest %d, poollets %d, Cluster API %d\n",
			anvil.refused("provider"), anvil.refused("manager-rest"), anvil.refused("poollet"), capi.refused())
		for _, component := range []string{"provider", "manager-rest", "poollet"} {
			fmt.Printf("capi-bench anvil %s writes: %s\n", component, anvil.breakdown(component))
		}
		fmt.Printf("capi-bench Cluster API writes: %s\n", capi.breakdown(mgmtHost, workloadHost))
		accounted := anvil.total("provider") + anvil.total("manager-rest") + anvil.total("poollet") + capi.total(mgmtHost) + testWrites
		fmt.Printf("capi-bench check: the management apiserver counted %.0f writes in the window; anvil + Cluster API + the test's %d creates = %d (the rest is the apiserver's own, e.g. its identity Leases)\n",
			apiAfter-apiBefore, testWrites, accounted)
		for j, name := range reconciledControllers {
			h := recAfter[j].minus(recBefore[j])
			if h.count() == 0 {
				b.Fatalf("controller %s reconciled nothing: is the provider running?", name)
			}
			if pooled[j] == nil {
				pooled[j] = h
			} else {
				pooled[j] = pooled[j].plus(h)
			}
			fmt.Printf("capi-bench reconcile %s: %d reconciles, p50 %.1f ms, p99 %.1f ms (estimated from the native histogram's buckets, each %.0f%% wide)\n",
				name, h.count(), 1000*h.quantile(0.5), 1000*h.quantile(0.99), 100*(h.growth()-1))
		}
		sum.seconds += wall
		sum.provider += perMachine(anvil.total("provider"))
		sum.anvil += perMachine(anvil.total("manager-rest"))
		sum.poollets += perMachine(anvil.total("poollet"))
		sum.capi += perMachine(capi.total(mgmtHost) + capi.total(workloadHost))

		deleteCluster(b, r, cluster)
	}
	n := float64(b.N)
	b.ReportMetric(sum.seconds/n, "s/op")
	b.ReportMetric(sum.provider/n, "provider-writes/Machine")
	b.ReportMetric(sum.anvil/n, "anvil-other-writes/Machine")
	b.ReportMetric(sum.poollets/n, "poollet-writes/Machine")
	b.ReportMetric(sum.capi/n, "capi-writes/Machine")
	b.ReportMetric(1000*pooled[0].quantile(0.5), "anvilmachine-p50-ms")
	b.ReportMetric(1000*pooled[0].quantile(0.99), "anvilmachine-p99-ms")
	b.ReportMetric(1000*pooled[1].quantile(0.5), "anvilcluster-p50-ms")
	b.ReportMetric(1000*pooled[1].quantile(0.99), "anvilcluster-p99-ms")
}

// testWrites are the benchmark's own writes to the management apiserver in the window:
// the Cluster's two Secrets, AnvilCluster and Cluster, the control plane's AnvilMachine
// and Machine, the AnvilMachineTemplate and MachineDeployment.
const testWrites = 8

// counting is the counter on the rig's anvil clients, made once with the rig.
var counting struct {
	once    sync.Once
	counter *writeCounter
}

// countingRig starts the rig with anvil's manager and poollets writing through a counter:
// the rig makes their clients from env.Config, so env.Config carries the counter while the
// rig starts, and only then. A rig started earlier (by a test in the same run) has no
// counter: the benchmark says so and stops.
func countingRig(b *testing.B) (*rig, *writeCounter) {
	b.Helper()
	counting.once.Do(func() {
		c := &writeCounter{writes: writeCounts{}, events: map[string]string{}}
		plain := env.Config
		counted := rest.CopyConfig(plain)
		counted.WrapTransport = c.wrap
		env.Config = counted
		defer func() { env.Config = plain }()
		theRig(b)
		counting.counter = c
	})
	r := theRig(b)
	if c := counting.counter; c != nil && c.sent() > 0 {
		return r, c
	}
	b.Fatal("the rig was started before this benchmark, so anvil's requests are not counted: run it alone, with -run '^$'")
	return nil, nil
}

// writeCounter counts the write requests (POST, PUT, PATCH, DELETE) anvil's in-process
// clients send, by who sent them and what they wrote.
type writeCounter struct {
	mu       sync.Mutex
	requests int
	writes   writeCounts
	// events maps an Event's name to the controller that reported it, for its later
	// PATCHes (series), whose bodies do not say.
	events map[string]string
}

// writeCounts are write requests keyed "component method resource", and refused ones
// (409) keyed "409 component".
type writeCounts map[string]int

func (c *writeCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		component, key := c.classify(req)
		resp, err := next.RoundTrip(req)
		if key == "" {
			return resp, err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.writes[component+" "+key]++
		if resp != nil && resp.StatusCode == http.StatusConflict {
			c.writes["409 "+component]++
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// providerControllers are the Event reporters of internal/controller/capi.
var providerControllers = map[string]bool{"anvilmachine": true, "anvilcluster": true, "anvilremediation": true}

// classify says which part of anvil sent a request and what it wrote ("" for a read):
// "poollet" for the poollets (they impersonate their pool's ServiceAccount); "provider" for
// the Cluster API provider's writes: its own kinds, the anvil Machines it creates and deletes
// (no other controller does in this benchmark), the first-boot Secrets (likewise) and the
// Events its controllers report; "manager-rest" for the rest of the manager (scheduler, claims,
// Secret access for poollets).
func (c *writeCounter) classify(req *http.Request) (component, key string) {
	c.mu.Lock()
	c.requests++
	c.mu.Unlock()
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return "", ""
	}
	group, resource, sub, name := apiPath(req.URL.Path)
	key = req.Method + " " + resource
	if sub != "" {
		key += "/" + sub
	}
	if group != "" {
		key += "." + group
	}
	switch {
	case req.Header.Get("Impersonate-User") != "":
		return "poollet", key
	case group == infrav1.GroupVersion.Group,
		group == computev1alpha1.GroupVersion.Group && resource == "machines" && sub == "" && (req.Method == http.MethodPost || req.Method == http.MethodDelete),
		group == "" && resource == "secrets":
		return "provider", key
	case group == "events.k8s.io" && resource == "events":
		reporter := c.eventReporter(req, name)
		key += " by " + reporter
		if providerControllers[reporter] {
			return "provider", key
		}
	}
	return "manager-rest", key
}

// eventReporter is the controller that reported the Event req writes ("?" when unknown).
func (c *writeCounter) eventReporter(req *http.Request, name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Method == http.MethodPost && req.GetBody != nil {
		// The body is protobuf or JSON, as the client chose.
		if body, err := req.GetBody(); err == nil {
			raw, _ := io.ReadAll(body)
			body.Close()
			if obj, _, err := clientscheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil); err == nil {
				if ev, ok := obj.(*eventsv1.Event); ok {
					c.events[ev.Name] = ev.ReportingController
					name = ev.Name
				}
			}
		}
	}
	if r := c.events[name]; r != "" {
		return r
	}
	return "?"
}

// apiPath splits a Kubernetes API path: /api/v1/namespaces/ns/secrets/name and
// /apis/group/version/[namespaces/ns/]resource/name/subresource.
func apiPath(path string) (group, resource, sub, name string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "", path, "", ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		sub = parts[2]
	}
	return group, resource, sub, name
}

func (c *writeCounter) sent() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

func (c *writeCounter) snapshot() writeCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.writes)
}

// since is what was counted after before was read.
func since[M ~map[string]V, V int | float64](after, before M) M {
	out := M{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (w writeCounts) total(component string) int {
	n := 0
	for k, v := range w {
		if strings.HasPrefix(k, component+" ") {
			n += v
		}
	}
	return n
}

func (w writeCounts) refused(component string) int { return w["409 "+component] }

// breakdown lists a component's writes by method and resource, most first.
func (w writeCounts) breakdown(component string) string {
	m := map[string]float64{}
	for k, v := range w {
		if rest, ok := strings.CutPrefix(k, component+" "); ok {
			m[rest] = float64(v)
		}
	}
	return mostFirst(m)
}

func mostFirst(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// capiMetricsURL is the metrics endpoint of the rig's Cluster API manager: capienv serves
// its diagnostics without TLS on a loopback port given on its command line.
func capiMetricsURL(b *testing.B, r *rig) string {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", r.capi.PID()))
	if err != nil {
		b.Fatalf("reading the Cluster API manager's command line: %v", err)
	}
	args := strings.Split(string(raw), "\x00")
	for i, a := range args {
		if a == "--diagnostics-address" && i+1 < len(args) {
			return "http://" + args[i+1] + "/metrics"
		}
	}
	b.Fatalf("the Cluster API manager has no --diagnostics-address: %q", args)
	return ""
}

// capiCounts are the Cluster API manager's client requests, keyed "host method code".
type capiCounts map[string]float64

// scrapeCAPI reads the Cluster API manager's rest_client_requests_total.
func scrapeCAPI(b *testing.B, url string) capiCounts {
	b.Helper()
	out := capiCounts{}
	for _, s := range scrape(b, url, "rest_client_requests_total") {
		out[s.labels["host"]+" "+s.labels["method"]+" "+s.labels["code"]] += s.value
	}
	return out
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// total is the writes sent to host.
func (c capiCounts) total(host string) int {
	n := 0.0
	for k, v := range c {
		f := strings.Fields(k)
		if f[0] == host && isWrite(f[1]) {
			n += v
		}
	}
	return int(n)
}

func (c capiCounts) refused() int {
	n := 0.0
	for k, v := range c {
		f := strings.Fields(k)
		if isWrite(f[1]) && f[2] == "409" {
			n += v
		}
	}
	return int(n)
}

// breakdown is the writes by apiserver and method (the metric has no resource).
func (c capiCounts) breakdown(mgmt, workload string) string {
	m := map[string]float64{}
	for k, v := range c {
		f := strings.Fields(k)
		if !isWrite(f[1]) {
			continue
		}
		where := f[0]
		switch where {
		case mgmt:
			where = "management"
		case workload:
			where = "workload"
		}
		m[where+" "+f[1]] += v
	}
	return mostFirst(m)
}

// sample is one line of a Prometheus text exposition.
type sample struct {
	labels map[string]string
	value  float64
}

// scrape reads the samples of one metric from a text endpoint.
func scrape(b *testing.B, url, metric string) []sample {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatalf("reading %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("reading %s: %s", url, resp.Status)
	}
	samples, err := parseSamples(resp.Body, metric)
	if err != nil {
		b.Fatalf("reading %s: %v", url, err)
	}
	return samples
}

func parseSamples(r io.Reader, metric string) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		end := strings.LastIndex(rest, "}")
		if end < 0 {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("malformed line %q: %w", line, err)
		}
		s := sample{labels: map[string]string{}, value: v}
		// Label values here (hosts, methods, codes, names) hold no quotes or commas.
		for _, pair := range strings.Split(rest[:end], ",") {
			k, val, ok := strings.Cut(pair, "=")
			if ok {
				s.labels[k] = strings.Trim(val, `"`)
			}
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// apiserverWrites is the management apiserver's own count of the write requests it served.
func apiserverWrites(b *testing.B, cs *kubernetes.Clientset) float64 {
	b.Helper()
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("reading the apiserver's metrics: %v", err)
	}
	samples, err := parseSamples(bytes.NewReader(raw), "apiserver_request_total")
	if err != nil {
		b.Fatal(err)
	}
	n := 0.0
	for _, s := range samples {
		switch s.labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION":
			n += s.value
		}
	}
	return n
}

// waitQuiet waits until no controller of this process (anvil's manager and poollets) nor of
// the Cluster API manager has work queued, three times in a row: each iteration starts from
// rest, not in the wake of the last one's deletion.
func waitQuiet(b *testing.B, capiMetrics string) {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for quiet := 0; quiet < 3; {
		busy := 0.0
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "workqueue_depth" {
				for _, m := range f.GetMetric() {
					busy += m.GetGauge().GetValue()
				}
			}
		}
		for _, s := range scrape(b, capiMetrics, "workqueue_depth") {
			busy += s.value
		}
		if busy > 0 {
			quiet = 0
		} else {
			quiet++
		}
		if time.Now().After(deadline) {
			b.Fatalf("controllers still busy (%v queued) after 3 minutes", busy)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// machineWatch follows the Cluster API Machines of a namespace from before the first is made.
type machineWatch struct {
	w       watch.Interface
	healthy map[string]bool
}

func watchMachines(b *testing.B, ns string) *machineWatch {
	b.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	w, err := c.Watch(context.Background(), &clusterv1.MachineList{}, client.InNamespace(ns))
	if err != nil {
		b.Fatalf("watching Machines: %v", err)
	}
	b.Cleanup(w.Stop)
	return &machineWatch{w: w, healthy: map[string]bool{}}
}

// waitHealthy returns when the watch shows n Machines, each Running with a healthy Node.
func (mw *machineWatch) waitHealthy(b *testing.B, n int, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.After(timeout)
	var last error
	for {
		select {
		case ev, ok := <-mw.w.ResultChan():
			if !ok {
				b.Fatal("the Machine watch ended")
			}
			m, ok := ev.Object.(*clusterv1.Machine)
			if !ok {
				b.Fatalf("Machine watch: %v", ev.Object)
			}
			switch ev.Type {
			case watch.Deleted:
				delete(mw.healthy, m.Name)
			case watch.Added, watch.Modified:
				last = capienv.Healthy(m)
				mw.healthy[m.Name] = last == nil
			}
			if mw.count() == n && len(mw.healthy) == n {
				return time.Now()
			}
		case <-deadline:
			b.Fatalf("%d of %d Machines healthy after %s (last: %v)", mw.count(), n, timeout, last)
		}
	}
}

func (mw *machineWatch) count() int {
	n := 0
	for _, ok := range mw.healthy {
		if ok {
			n++
		}
	}
	return n
}

// checkOnPool checks, after the clock, that the MachineDeployment's Machines are where it
// asked: anvil Machines of amd64, Running on the pool of zone-a.
func checkOnPool(b *testing.B, md *clusterv1.MachineDeployment) {
	b.Helper()
	ctx := context.Background()
	machines, err := capienv.MachinesOf(ctx, env.Client, md)
	if err != nil {
		b.Fatal(err)
	}
	for i := range machines {
		if err := onPool(ctx, &machines[i], computev1alpha1.ArchitectureAMD64, "zone-a"); err != nil {
			b.Fatal(err)
		}
	}
}

// deleteCluster deletes the Cluster the Cluster API way and waits until its anvil Machines
// are gone, then removes stand-in Nodes of the namespace that Cluster API left.
func deleteCluster(b *testing.B, r *rig, cluster *clusterv1.Cluster) {
	b.Helper()
	ctx := context.Background()
	if err := env.Client.Delete(ctx, cluster); err != nil {
		b.Fatal(err)
	}
	capienv.Eventually(b, 5*time.Minute, "the Cluster and its anvil Machines gone", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Cluster still there (%v)", err)
		}
		anvils := &computev1alpha1.MachineList{}
		if err := env.Client.List(ctx, anvils, client.InNamespace(cluster.Namespace)); err != nil {
			return err
		}
		if len(anvils.Items) > 0 {
			return fmt.Errorf("%d anvil Machines left", len(anvils.Items))
		}
		return nil
	})
	nodes := &corev1.NodeList{}
	if err := r.workloadClient.List(ctx, nodes, client.HasLabels{standInLabel}); err != nil {
		b.Fatal(err)
	}
	for i := range nodes.Items {
		if strings.HasPrefix(nodes.Items[i].Name, cluster.Namespace+"-") {
			if err := r.workloadClient.Delete(ctx, &nodes.Items[i]); client.IgnoreNotFound(err) != nil {
				b.Fatal(err)
			}
		}
	}
}

// reconciledControllers are the provider controllers whose reconcile times are reported.
var reconciledControllers = []string{"anvilmachine", "anvilcluster"}

// reconcileTimes reads controller-runtime's reconcile time histogram of each of
// reconciledControllers from this process's registry (their names are the provider's alone).
func reconcileTimes(b *testing.B) []*nativeHistogram {
	b.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := make([]*nativeHistogram, len(reconciledControllers))
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				for i, name := range reconciledControllers {
					if l.GetName() != "controller" || l.GetValue() != name {
						continue
					}
					h := m.GetHistogram()
					if h.Schema == nil {
						b.Fatalf("controller_runtime_reconcile_time_seconds{controller=%q} has no native buckets", name)
					}
					nh := &nativeHistogram{schema: h.GetSchema(), zero: h.GetZeroCount(), buckets: map[int]uint64{}}
					idx, count, d := 0, int64(0), h.GetPositiveDelta()
					for _, span := range h.GetPositiveSpan() {
						idx += int(span.GetOffset())
						for range span.GetLength() {
							count += d[0]
							d = d[1:]
							nh.buckets[idx] = uint64(count)
							idx++
						}
					}
					out[i] = nh
				}
			}
		}
	}
	for i, h := range out {
		if h == nil { // no reconcile yet: empty, at the finest schema
			out[i] = &nativeHistogram{schema: 8, buckets: map[int]uint64{}}
		}
	}
	return out
}

// nativeHistogram is a Prometheus native histogram's positive buckets: bucket i counts the
// observations in (γ^(i-1), γ^i], γ = 2^(2^-schema); zero counts those at zero.
type nativeHistogram struct {
	schema  int32
	zero    uint64
	buckets map[int]uint64
}

// at is h at a schema no finer than its own: 2^(h.schema-schema) buckets merged into one.
func (h *nativeHistogram) at(schema int32) *nativeHistogram {
	out := &nativeHistogram{schema: schema, zero: h.zero, buckets: map[int]uint64{}}
	shift := h.schema - schema
	for i, n := range h.buckets {
		out.buckets[((i-1)>>shift)+1] += n
	}
	return out
}

// minus is what was observed after before: a histogram only coarsens as it fills, so both
// are taken to the coarser schema.
func (h *nativeHistogram) minus(before *nativeHistogram) *nativeHistogram {
	s := min(h.schema, before.schema)
	a, bb := h.at(s), before.at(s)
	out := &nativeHistogram{schema: s, zero: a.zero - bb.zero, buckets: map[int]uint64{}}
	for i, n := range a.buckets {
		if n > bb.buckets[i] {
			out.buckets[i] = n - bb.buckets[i]
		}
	}
	return out
}

func (h *nativeHistogram) plus(o *nativeHistogram) *nativeHistogram {
	s := min(h.schema, o.schema)
	a, bb := h.at(s), o.at(s)
	for i, n := range bb.buckets {
		a.buckets[i] += n
	}
	a.zero += bb.zero
	return a
}

func (h *nativeHistogram) count() uint64 {
	n := h.zero
	for _, c := range h.buckets {
		n += c
	}
	return n
}

// growth is γ, the ratio of a bucket's upper bound to its lower.
func (h *nativeHistogram) growth() float64 { return math.Exp2(math.Exp2(-float64(h.schema))) }

// quantile estimates the q-quantile: the bucket holding it, interpolated within it
// exponentially (as Prometheus's histogram_quantile does for native histograms).
func (h *nativeHistogram) quantile(q float64) float64 {
	total := h.count()
	if total == 0 {
		return math.NaN()
	}
	rank := q * float64(total)
	if rank <= float64(h.zero) {
		return 0
	}
	seen := float64(h.zero)
	idx := make([]int, 0, len(h.buckets))
	for i := range h.buckets {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	g := h.growth()
	for _, i := range idx {
		n := float64(h.buckets[i])
		if seen+n >= rank {
			upper := math.Pow(g, float64(i))
			return upper / g * math.Pow(g, (rank-seen)/n)
		}
		seen += n
	}
	return math.Pow(g, float64(idx[len(idx)-1]))
}

// hostOf is host:port of an apiserver URL, as client-go labels its requests.
func hostOf(b *testing.B, url string) string {
	b.Helper()
	host, ok := strings.CutPrefix(url, "https://")
	if !ok {
		b.Fatalf("apiserver %q is not https", url)
	}
	return strings.TrimSuffix(host, "/")
}

// The benchmark's own arithmetic: API paths split into what was written, and reconcile
// quantiles read from native histogram buckets, also after the histogram coarsened.
func TestBenchmarkArithmetic(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"/api/v1/namespaces/ns/secrets", "|secrets||"},
		{"/api/v1/namespaces/ns/secrets/boot", "|secrets||boot"},
		{"/api/v1/namespaces", "|namespaces||"},
		{"/apis/compute.anvil.dev/v1alpha1/namespaces/ns/machines/m/status", "compute.anvil.dev|machines|status|m"},
		{"/apis/compute.anvil.dev/v1alpha1/machinepools/p", "compute.anvil.dev|machinepools||p"},
		{"/healthz", "|/healthz||"},
	} {
		g, r, s, n := apiPath(c.path)
		if got := strings.Join([]string{g, r, s, n}, "|"); got != c.want {
			t.Errorf("apiPath(%q) = %q, want %q", c.path, got, c.want)
		}
	}

	// Schema 0: bucket i is (2^(i-1), 2^i]. 50 observations in (0.5, 1], 50 in (2, 4].
	h := &nativeHistogram{schema: 0, buckets: map[int]uint64{0: 50, 2: 50}}
	for _, c := range []struct{ q, want float64 }{{0.5, 1}, {0.25, math.Sqrt(0.5)}, {0.75, 2 * math.Sqrt2}, {1, 4}} {
		if got := h.quantile(c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	// Schema 1 buckets (2^((i-1)/2), 2^(i/2)] merge pairwise into schema 0's.
	fine := &nativeHistogram{schema: 1, buckets: map[int]uint64{-1: 1, 0: 2, 1: 3, 2: 4, 3: 5}}
	if got := fmt.Sprint(fine.at(0).buckets); got != "map[0:3 1:7 2:5]" {
		t.Errorf("schema 1 at schema 0 = %s, want map[0:3 1:7 2:5]", got)
	}
	// After coarsening, what came since is the difference at the coarser schema.
	later := &nativeHistogram{schema: 0, buckets: map[int]uint64{0: 3, 1: 10, 2: 5}}
	if d := later.minus(fine); d.count() != 3 || d.buckets[1] != 3 {
		t.Errorf("since = %v, want 3 in bucket 1", d.buckets)
	}
}
