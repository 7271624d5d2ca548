package osimage_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/index"
	osimagecontroller "github.com/anvil-dev/anvil/internal/controller/osimage"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/testos"
)

// BenchmarkNoOpReconcile is the figure "a no-op reconcile of an OSImage whose inputs did not
// change": both controllers' reconciles of a published OSImage (amd64 and arm64, on a real
// apiserver and registry), reporting the Machines they created and the registry writes they
// made (a proxy in front of the registry counts every request that is not GET or HEAD).
// Every architecture's hash tag is pushed before the build runs, so the image is published
// from Reused entries and no builder is needed to get there.
// noopRuns tells the benchmark's runs apart: the testing package calls it once per b.N.
var noopRuns atomic.Int64

func BenchmarkNoOpReconcile(b *testing.B) {
	ctx := context.Background()
	name := fmt.Sprintf("noop-%d", noopRuns.Add(1))
	var writes atomic.Int64
	target, err := url.Parse("http://" + env.Registry.Host)
	if err != nil {
		b.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writes.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	reg := strings.TrimPrefix(srv.URL, "http://")

	dir := testos.Dir(b)
	sources := map[computev1alpha1.Architecture]string{"amd64": filepath.Join(dir, "amd64"), "arm64": filepath.Join(dir, "arm64")}
	base, builder := reg+"/anvil/testos:noop", reg+"/anvil/builder:noop"
	for _, ref := range []string{base, builder} {
		if _, _, err := osimage.PushDirs(ctx, ref, sources, nil); err != nil {
			b.Fatal(err)
		}
	}
	pool := &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(ctx, pool); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Client.Delete(context.Background(), pool) })
	pool.Status.Architectures = []computev1alpha1.Architecture{"amd64", "arm64"}
	pool.Status.Execution = []computev1alpha1.ArchitectureExecution{{Architecture: "amd64", Execution: computev1alpha1.ExecutionNative}, {Architecture: "arm64", Execution: computev1alpha1.ExecutionNative}}
	pool.Status.Conditions = []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, pool); err != nil {
		b.Fatal(err)
	}

	// The reconcilers called directly, not by a running manager: nothing else reconciles
	// in between, so each iteration is one reconcile of each.
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		b.Fatal(err)
	}
	// Only Machines are read from the manager's cache, by the tag index the rollout lists
	// them with; everything else goes to the apiserver, so each reconcile sees the last.
	if err := index.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		b.Fatal(err)
	}
	harness.RunManager(b, mgr)
	machinesCached, err := client.New(env.Config, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: mgr.GetCache(),
		DisableFor: []client.Object{&imagesv1alpha1.OSImage{}, &imagesv1alpha1.OSImageBuild{}, &computev1alpha1.MachinePool{}, &corev1.ConfigMap{}, &corev1.Secret{}}}})
	if err != nil {
		b.Fatal(err)
	}
	cfg := osimagecontroller.Config{BuilderImage: builder, BuilderNetwork: "builders", Registry: reg, GuestRegistry: "10.0.2.100:5000", GuestPlainHTTP: true}
	images := &osimagecontroller.OSImageReconciler{Client: machinesCached, APIReader: env.Client, Config: cfg, Events: events.New(mgr.GetEventRecorder("bench"), nil)}
	builds := &osimagecontroller.BuildReconciler{Client: env.Client, APIReader: env.Client, Config: cfg, Events: events.New(mgr.GetEventRecorder("bench"), nil), Now: time.Now}

	o := recipe(name, base, "amd64", "arm64")
	o.Spec.Output.Repository = reg + "/" + o.Namespace + "/" + name
	if err := env.Client.Create(ctx, o); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(o)}
	reconcileBoth := func() {
		if _, err := images.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
		if err := env.Client.Get(ctx, req.NamespacedName, o); err != nil {
			b.Fatal(err)
		}
		if o.Status.LatestBuild == "" {
			b.Fatalf("no build: %+v", o.Status)
		}
		if _, err := builds.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: o.Namespace, Name: o.Status.LatestBuild}}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := images.Reconcile(ctx, req); err != nil {
		b.Fatal(err)
	}
	if err := env.Client.Get(ctx, req.NamespacedName, o); err != nil {
		b.Fatal(err)
	}
	build := &imagesv1alpha1.OSImageBuild{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Status.LatestBuild}, build); err != nil {
		b.Fatal(err)
	}
	for _, in := range build.Spec.Architectures {
		files, err := osimage.FromDir(in.Architecture, sources[in.Architecture])
		if err != nil {
			b.Fatal(err)
		}
		img, err := osimage.Build(files)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := osimage.PushImage(ctx, o.Spec.Output.Repository+":"+imagebuild.HashTag(string(in.Architecture), in.InputHash), img); err != nil {
			b.Fatal(err)
		}
	}
	reconcileBoth() // publishes
	reconcileBoth() // copies the publication into the OSImage's status
	if err := env.Client.Get(ctx, req.NamespacedName, o); err != nil {
		b.Fatal(err)
	}
	if o.Status.Index == "" {
		b.Fatalf("not published: %+v", o.Status)
	}

	if writes.Load() == 0 {
		b.Fatal("the proxy counted no write while the image was pushed and published: it does not see the controllers' traffic")
	}
	writes.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reconcileBoth()
	}
	b.StopTimer()
	if n := len(machinesOf(b, name)); n != 0 {
		b.Errorf("a no-op reconcile created %d Machines", n)
	}
	b.ReportMetric(float64(len(machinesOf(b, name))), "machines")
	b.ReportMetric(float64(writes.Load())/float64(b.N), "registry-writes/op")
}
