package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// runPoollets is the child process holding every fake runtime and its poollet, each
// runtime behind its own unix socket as in a real deployment.
func runPoollets(args []string) error {
	fs := flag.NewFlagSet("poollets", flag.ContinueOnError)
	pools := fs.Int("pools", 100, "pools")
	dir := fs.String("dir", os.TempDir(), "folder for the sockets")
	cpu := fs.Int64("cpu", 512, "allocatable cpu of each pool")
	profile := fs.String("cpuprofile", "", "write a CPU profile of this process here")
	metricsAddr := fs.String("metrics-addr", "", "serve this process's metrics (all poollets') over HTTP here; loopback only")
	interval := fs.Duration("interval", 0, "each poollet's --interval (its runtime read and Lease renewal), the Lease lasting four of them; 0 keeps the poollet's default")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	errs := make(chan error, 2**pools+1)
	if *metricsAddr != "" {
		if err := serveMetrics(ctx, *metricsAddr, errs); err != nil {
			return err
		}
	}
	for i := 0; i < *pools; i++ {
		name := fmt.Sprintf("pool-%03d", i)
		rt, err := fake.New(fake.Config{Name: name,
			Allocatable:   &mriv1alpha1.Resources{MilliCpu: *cpu * 1000, MemoryBytes: 1 << 40},
			Architectures: []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64}})
		if err != nil {
			return err
		}
		endpoint := "unix://" + filepath.Join(*dir, name+".sock")
		l, err := mri.Listen(endpoint)
		if err != nil {
			return err
		}
		go func() { errs <- mri.ServeListener(ctx, l, rt, mri.Pool(name)) }()
		client, _, err := mri.Dial(endpoint, mri.Pool(name))
		if err != nil {
			return err
		}
		o := poollet.DefaultOptions(name)
		o.Runtime, o.SkipControllerNameValidation = client, true
		if *interval > 0 {
			o.Interval, o.LeaseDuration = *interval, 4**interval
		}
		mgr, err := poollet.New(cfg, o)
		if err != nil {
			return err
		}
		go func() { errs <- mgr.Start(ctx) }()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// serveMetrics serves controller-runtime's registry, which every poollet of the process
// counts into, on addr until ctx ends.
func serveMetrics(ctx context.Context, addr string, errs chan<- error) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}
