package manager

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/internal/watchstats"
)

// Base are the knobs every anvil controller process shares (the manager, the Cluster API
// provider): how hard it talks to the apiserver, where it serves metrics and probes, leader
// election.
type Base struct {
	// Concurrency is how many objects of one kind each controller reconciles at once.
	Concurrency int
	// QPS and Burst limit the process's requests to the apiserver.
	QPS   float32
	Burst int
	// SyncPeriod is how often every watched object is reconciled again even without a change.
	SyncPeriod time.Duration
	// MetricsAddr and HealthAddr are where metrics and health probes are served; "0" turns
	// either off. Metrics are served over HTTPS to callers whose token may get /metrics
	// (the anvil-metrics-reader ClusterRole): their counts and names describe every tenant.
	MetricsAddr string
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint; empty serves a
	// self-signed certificate made at start.
	MetricsCertDir string
	HealthAddr     string
	// LeaderElection makes only one of several replicas active at a time.
	LeaderElection          bool
	LeaderElectionNamespace string
	// SkipControllerNameValidation allows building more than one manager in one process,
	// as tests and benchmarks do; controller names are otherwise checked for uniqueness.
	SkipControllerNameValidation bool
}

// DefaultBase suits one process against a dedicated apiserver, serving metrics and probes
// on the addresses given.
func DefaultBase(metricsAddr, healthAddr string) Base {
	return Base{Concurrency: 4, QPS: 200, Burst: 400, SyncPeriod: 10 * time.Hour, MetricsAddr: metricsAddr, HealthAddr: healthAddr}
}

// AddFlags registers b's fields as flags on fs, with b's current values as defaults.
func (b *Base) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&b.Concurrency, "concurrency", b.Concurrency, "objects of one kind each controller reconciles at once")
	fs.Float32Var(&b.QPS, "kube-api-qps", b.QPS, "requests per second the process may send to the apiserver")
	fs.IntVar(&b.Burst, "kube-api-burst", b.Burst, "requests the process may send in a burst above --kube-api-qps")
	fs.DurationVar(&b.SyncPeriod, "resync-period", b.SyncPeriod, "how often every object is reconciled again without a change")
	fs.StringVar(&b.MetricsAddr, "metrics-bind-address", b.MetricsAddr, "address of the metrics endpoint (HTTPS; a token allowed to get /metrics is needed); 0 turns it off")
	fs.StringVar(&b.MetricsCertDir, "metrics-cert-dir", b.MetricsCertDir, "folder holding tls.crt and tls.key of the metrics endpoint; empty serves a self-signed certificate")
	fs.StringVar(&b.HealthAddr, "health-probe-bind-address", b.HealthAddr, "address of the /healthz and /readyz endpoints; 0 turns them off")
	fs.BoolVar(&b.LeaderElection, "leader-elect", b.LeaderElection, "elect one active process among replicas")
	fs.StringVar(&b.LeaderElectionNamespace, "leader-election-namespace", b.LeaderElectionNamespace, "namespace of the leader election Lease")
}

// Validate says what to fix in b, if anything.
func (b Base) Validate() error {
	switch {
	case b.Concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, not %d", b.Concurrency)
	case b.QPS <= 0:
		return fmt.Errorf("--kube-api-qps must be positive, not %v", b.QPS)
	case b.Burst < 1:
		return fmt.Errorf("--kube-api-burst must be at least 1, not %d", b.Burst)
	case b.SyncPeriod <= 0:
		return fmt.Errorf("--resync-period must be positive, not %s", b.SyncPeriod)
	}
	return nil
}

// NewControllerManager is the controller-runtime manager of an anvil process: anvil's
// scheme, b's limits, metrics, probes and leader election (under leaderID), and the cache
// options given (b's sync period is set on them).
func NewControllerManager(cfg *rest.Config, b Base, leaderID string, c cache.Options) (ctrl.Manager, error) {
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = b.QPS, b.Burst
	c.Scheme, c.SyncPeriod = scheme, &b.SyncPeriod
	// Watches that end and lists made again are counted, by process (watchstats).
	c.NewInformer = watchstats.NewInformer(leaderID)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  c,
		Controller: config.Controller{
			MaxConcurrentReconciles: b.Concurrency,
			SkipNameValidation:      &b.SkipControllerNameValidation,
		},
		Metrics:                 b.metricsServer(),
		HealthProbeBindAddress:  b.HealthAddr,
		LeaderElection:          b.LeaderElection,
		LeaderElectionID:        leaderID,
		LeaderElectionNamespace: b.LeaderElectionNamespace,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the controller manager: %w", err)
	}
	if b.HealthAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// metricsServer serves metrics only over HTTPS and only to callers whose token the
// apiserver authenticates and allows to get the /metrics non-resource URL (TokenReview
// and SubjectAccessReview), never to anonymous callers or tenants.
func (b Base) metricsServer() metricsserver.Options {
	return metricsserver.Options{
		BindAddress:    b.MetricsAddr,
		SecureServing:  true,
		CertDir:        b.MetricsCertDir,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
	}
}
