// Command ui measures anvil ui (docs/ui.md) on a large fleet: a real kube-apiserver and etcd
// holding N MachinePools and M Machines (their statuses written as poollets would, so no
// runtime runs), anvil ui as a process with the admin's kubeconfig, and headless Chromium.
// It prints, as JSON: the seconds from anvil ui's start to serving (its lists in); the
// first render of the Fleet page (every pool drawn) and of the Machines page (its first
// rows drawn) from navigation; anvil ui's RSS once both pages are open; and the latency
// from a Machine's status write returning to the open page showing it (median and max).
//
//	go run ./test/scale/ui -machines 10000 -pools 1000
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

const namespace = "scale"

type report struct {
	Machines int `json:"machines"`
	Pools    int `json:"pools"`
	// ServingSeconds: anvil ui's start to its address printed (every list in).
	ServingSeconds float64 `json:"uiStartToServingSeconds"`
	// FleetFirstRender and MachinesFirstRender: navigation to the page drawn with every
	// pool, and with its first rows (the page draws 500 at most).
	FleetFirstRender    float64 `json:"fleetPageFirstRenderSeconds"`
	MachinesFirstRender float64 `json:"machinesPageFirstRenderSeconds"`
	RSSMiB              float64 `json:"uiRSSMiBWithBothPagesOpen"`
	// Update latency: a Machine's status write returned → the open Machines page shows it.
	UpdateMedianMillis float64 `json:"statusWriteToPageMedianMillis"`
	UpdateMaxMillis    float64 `json:"statusWriteToPageMaxMillis"`
	Updates            int     `json:"updatesMeasured"`
}

func main() {
	machines := flag.Int("machines", 10000, "Machines")
	pools := flag.Int("pools", 1000, "MachinePools")
	updates := flag.Int("updates", 20, "status writes whose latency to the page is measured")
	chromium := flag.String("chromium", "/usr/bin/chromium-headless-shell", "the headless browser")
	flag.Parse()
	rep, err := run(*machines, *pools, *updates, *chromium)
	out, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Println(string(out))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ui:", err)
		os.Exit(1)
	}
}

func run(machines, pools, updates int, chromium string) (report, error) {
	rep := report{Machines: machines, Pools: pools}
	env, err := harness.Start()
	if err != nil {
		return rep, err
	}
	defer env.Stop()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "anvil-scale-ui-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	raw, err := env.AdminKubeconfig("scale-ui")
	if err != nil {
		return rep, err
	}
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		return rep, err
	}
	anvil, err := harness.AnvilBinary(dir)
	if err != nil {
		return rep, err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(os.Stderr, "creating %d pools and %d Machines\n", pools, machines)
	if err := fill(ctx, c, machines, pools); err != nil {
		return rep, err
	}

	start := time.Now()
	cmd := exec.Command(anvil, "ui", "--kubeconfig", kubeconfig, "--address", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return rep, err
	}
	if err := cmd.Start(); err != nil {
		return rep, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	url, err := printedURL(stdout, 5*time.Minute)
	if err != nil {
		return rep, err
	}
	rep.ServingSeconds = round(time.Since(start).Seconds())

	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.WindowSize(1280, 900), chromedp.UserDataDir(filepath.Join(dir, "chromium")))...)
	defer cancelAlloc()
	fleet, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(fleet); err != nil {
		return rep, err
	}
	// The printed address opens the Fleet page.
	t0 := time.Now()
	if err := timed(fleet, 5*time.Minute, url,
		fmt.Sprintf(`document.body.dataset.synced === "true" && document.querySelectorAll("article[data-pool]").length >= %d`, pools)); err != nil {
		return rep, fmt.Errorf("the Fleet page: %w", err)
	}
	rep.FleetFirstRender = round(time.Since(t0).Seconds())

	list, cancelList := chromedp.NewContext(fleet) // a second tab of the browser: a second feed
	defer cancelList()
	if err := chromedp.Do(list); err != nil {
		return rep, err
	}
	t0 = time.Now()
	if err := timed(list, 5*time.Minute, url+"#/machines",
		`document.body.dataset.synced === "true" && document.querySelectorAll("tr[data-machine]").length >= Math.min(500, `+fmt.Sprint(machines)+`)`); err != nil {
		return rep, fmt.Errorf("the Machines page: %w; it shows:\n%s", err, pageText(list))
	}
	rep.MachinesFirstRender = round(time.Since(t0).Seconds())
	rss, err := measure.RSSBytes(cmd.Process.Pid)
	if err != nil {
		return rep, err
	}
	rep.RSSMiB = round(float64(rss) / (1 << 20))

	// The first Machine by name is on the page's first row: alternate its state.
	var took []float64 // milliseconds
	m := &computev1alpha1.Machine{}
	for i := range updates {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: machineName(0)}, m); err != nil {
			return rep, err
		}
		state := []computev1alpha1.MachineState{computev1alpha1.MachineStateShutdown, computev1alpha1.MachineStateRunning}[i%2]
		m.Status.State = state
		if err := c.Status().Update(ctx, m); err != nil {
			return rep, err
		}
		t0 := time.Now()
		if err := timed(list, time.Minute, "", fmt.Sprintf(`!!document.querySelector('tr[data-machine="%s/%s"][data-state=%q]')`, namespace, machineName(0), state)); err != nil {
			return rep, fmt.Errorf("update %d: %w", i, err)
		}
		took = append(took, float64(time.Since(t0).Microseconds())/1000)
	}
	if len(took) > 0 {
		rep.Updates = len(took)
		rep.UpdateMedianMillis = round(measure.Median(took))
		rep.UpdateMaxMillis = round(slices.Max(took))
	}
	return rep, nil
}

// fill creates the pools with their status (architecture, allocatable, Ready) and the
// Machines, Running on them, from 16 goroutines.
func fill(ctx context.Context, c client.Client, machines, pools int) error {
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	archs := []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}
	return parallel(16, pools+machines, func(i int) error {
		if i < pools {
			mp := &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: poolName(i)},
				Spec: computev1alpha1.MachinePoolSpec{ProviderID: "fake://" + poolName(i)}}
			if err := c.Create(ctx, mp); err != nil {
				return err
			}
			mp.Status = computev1alpha1.MachinePoolStatus{Architectures: []computev1alpha1.Architecture{archs[i%2]},
				Execution:   []computev1alpha1.ArchitectureExecution{{Architecture: archs[i%2], Execution: computev1alpha1.ExecutionNative}},
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi")},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi")},
				Allocated:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourceMemory: resource.MustParse("10Gi")},
				Conditions: []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: computev1alpha1.ReasonRuntimeReachable,
					Message: "the runtime answers", LastTransitionTime: metav1.Now()}}}
			return c.Status().Update(ctx, mp)
		}
		n := i - pools
		pool := poolName(n % pools)
		m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: machineName(n)},
			Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
				Image: "registry.example/os:1", MachinePoolRef: &computev1alpha1.LocalObjectReference{Name: pool}}}
		if err := c.Create(ctx, m); err != nil {
			return err
		}
		m.Status = computev1alpha1.MachineStatus{State: computev1alpha1.MachineStateRunning, Pool: pool, Architecture: archs[(n%pools)%2],
			MachineID: fmt.Sprintf("id-%d", n),
			Conditions: []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Running",
				Message: "running on pool " + pool, LastTransitionTime: metav1.Now()}}}
		return c.Status().Update(ctx, m)
	})
}

func poolName(i int) string    { return fmt.Sprintf("pool-%04d", i) }
func machineName(i int) string { return fmt.Sprintf("m-%05d", i) }

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(workers, n int, f func(int) error) error {
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// printedURL is the address anvil ui prints once it serves.
func printedURL(stdout interface{ Read([]byte) (int, error) }, limit time.Duration) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "anvil ui: open "); ok {
				found <- url
			}
		}
	}()
	select {
	case url := <-found:
		return url, nil
	case <-time.After(limit):
		return "", fmt.Errorf("anvil ui printed no address within %s", limit)
	}
}

// timed opens url in the tab (when not empty), then waits until the JavaScript expression
// is true there, all within limit.
func timed(ctx context.Context, limit time.Duration, url, expr string) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if url != "" {
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			return err
		}
	}
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr))
	return err
}

// pageText is what a tab shows, for an error.
func pageText(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		return err.Error()
	}
	return s
}

func round(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }
