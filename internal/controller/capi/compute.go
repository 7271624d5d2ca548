package capi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/identity"
	"github.com/anvil-dev/anvil/internal/watchstats"
)

// Compute is the anvil control plane a cluster's anvil Machines live in: this one, or the
// one an AnvilCluster's identityRef names (where the Hosts, pools and BMC credentials stay
// when the Cluster API objects move).
type Compute struct {
	// Client reads (cached: Machines of Namespace) and writes there.
	Client client.Client
	// Reader reads there without a cache (Secrets, pools).
	Reader client.Reader
	// Namespace is where the anvil Machines go; empty: the AnvilMachine's own namespace.
	Namespace string
	// Remote is true for another control plane, reached through an identity: its calls are
	// bounded (see bound).
	Remote bool
}

// namespaceFor is where the anvil Machine of an AnvilMachine in namespace ns goes.
func (c Compute) namespaceFor(ns string) string {
	if c.Namespace != "" {
		return c.Namespace
	}
	return ns
}

// bound limits the rest of a reconcile that calls a remote control plane: a control plane
// that stops answering holds a worker for remoteReconcileTimeout at most.
func (c Compute) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if !c.Remote {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, remoteReconcileTimeout)
}

// Timeouts of remote control planes. A tenant names the server, so it may accept and never
// answer: every wait on it is bounded, and none is made while holding a lock others need.
const (
	// remoteSyncTimeout bounds connecting: the first listing and the cache's sync.
	remoteSyncTimeout = 20 * time.Second
	// remoteRequestTimeout bounds each request of the remote clients (not the cache's watches).
	remoteRequestTimeout = 10 * time.Second
	// remoteDialTimeout bounds each TCP connection.
	remoteDialTimeout = 5 * time.Second
	// remoteReconcileTimeout bounds what one reconcile does with a remote control plane.
	remoteReconcileTimeout = 15 * time.Second
	// connectWait is how long a reconcile waits for a connection under way before it says
	// so and is requeued: a worker is never held for a whole connection attempt.
	connectWait = 3 * time.Second
	// retryFailed is how soon a failed connection is tried again.
	retryFailed = 10 * time.Second
)

// Computes gives each AnvilCluster its Compute, starting one cache per remote identity
// (per Secret version) and telling the controllers to watch its Machines.
type Computes struct {
	Local  Compute
	Scheme *runtime.Scheme
	// APIReader reads identity Secrets and AnvilClusterIdentities here.
	APIReader client.Reader
	// OnRemote is called once for each new remote: the controllers add their watches of
	// its Machines, mapping them to objects in the AnvilCluster's namespace.
	OnRemote func(c cluster.Cluster, localNamespace string) error
	// AllowLoopback lets identities name control planes on loopback addresses
	// (--capi-identity-allow-loopback: tests, one host running both anvils).
	AllowLoopback bool

	// mu guards ctx and remotes, and is never held across I/O: connections are made by
	// one goroutine per identity (a single flight) that callers wait for without it.
	mu sync.Mutex
	// ctx bounds the remote caches' lives: the manager's, once it runs.
	ctx     context.Context
	remotes map[types.NamespacedName]*remote
}

// remote is one identity's connection, made once per Secret version.
type remote struct {
	version string // of the identity Secret it was made from
	host    string
	// done is closed when connecting ended; compute, err and ended are set before.
	done    chan struct{}
	compute Compute
	err     error
	ended   time.Time
	stop    context.CancelFunc
}

// connectingError says a connection is under way: the caller looks again shortly.
type connectingError struct{ host string }

func (e *connectingError) Error() string {
	return fmt.Sprintf("connecting to the anvil control plane at %s", e.host)
}

// isConnecting says whether err only means a connection is still being made.
func isConnecting(err error) bool {
	var c *connectingError
	return errors.As(err, &c)
}

// For is the Compute of an AnvilCluster (nil: this anvil). The identity is checked on every
// call (a grant may be withdrawn); the connection is made once per Secret version.
func (cs *Computes) For(ctx context.Context, ac *infrav1.AnvilCluster) (Compute, error) {
	if ac == nil || ac.Spec.IdentityRef == nil {
		return cs.Local, nil
	}
	id, version, err := cs.identity(ctx, ac)
	if err != nil {
		return Compute{}, fmt.Errorf("identityRef Secret %s/%s: %w", ac.Namespace, ac.Spec.IdentityRef.Name, err)
	}
	key := types.NamespacedName{Namespace: ac.Namespace, Name: ac.Name}
	r := cs.remoteFor(key, version, id, ac.Namespace)
	wait := time.NewTimer(connectWait)
	defer wait.Stop()
	select {
	case <-r.done:
		if r.err != nil {
			return Compute{}, fmt.Errorf("identityRef Secret %s/%s: %w", ac.Namespace, ac.Spec.IdentityRef.Name, r.err)
		}
		return r.compute, nil
	case <-wait.C:
	case <-ctx.Done():
	}
	return Compute{}, &connectingError{host: r.host}
}

// identity reads and checks the AnvilCluster's identity: the kubeconfig's fields, and the
// namespace it names against the admin's grants. It makes no call to the remote.
func (cs *Computes) identity(ctx context.Context, ac *infrav1.AnvilCluster) (identity.Identity, string, error) {
	secret := &corev1.Secret{}
	if err := cs.APIReader.Get(ctx, client.ObjectKey{Namespace: ac.Namespace, Name: ac.Spec.IdentityRef.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return identity.Identity{}, "", errors.New("not found")
		}
		return identity.Identity{}, "", err
	}
	key := ac.Spec.IdentityRef.Key
	if key == "" {
		key = "value"
	}
	data, ok := secret.Data[key]
	if !ok {
		return identity.Identity{}, "", fmt.Errorf("no key %q", key)
	}
	id, err := identity.Parse(data)
	if err != nil {
		return identity.Identity{}, "", err
	}
	if id.Namespace != ac.Namespace {
		grants, err := cs.grants(ctx)
		if err != nil {
			return identity.Identity{}, "", err
		}
		if !identity.NamespaceAllowed(ac.Namespace, id.Namespace, grants) {
			return identity.Identity{}, "", fmt.Errorf("the kubeconfig's context names namespace %s, and no AnvilClusterIdentity allows AnvilClusters of namespace %s to use it: an infrastructure admin grants the pair (remoteNamespace %s, allowedNamespaces [%s])",
				id.Namespace, ac.Namespace, id.Namespace, ac.Namespace)
		}
	}
	return id, secret.ResourceVersion, nil
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvilclusteridentities,verbs=get;list

// grants are the admin's AnvilClusterIdentities.
func (cs *Computes) grants(ctx context.Context) ([]identity.Grant, error) {
	list := &infrav1.AnvilClusterIdentityList{}
	if err := cs.APIReader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("reading AnvilClusterIdentities: %w", err)
	}
	out := make([]identity.Grant, 0, len(list.Items))
	for _, g := range list.Items {
		out = append(out, identity.Grant{RemoteNamespace: g.Spec.RemoteNamespace, AllowedNamespaces: g.Spec.AllowedNamespaces})
	}
	return out, nil
}

// remoteFor is the connection of key for this Secret version: the one made or being made,
// or a new one started in the background. Only map access happens under the lock.
func (cs *Computes) remoteFor(key types.NamespacedName, version string, id identity.Identity, localNamespace string) *remote {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if r, ok := cs.remotes[key]; ok {
		failedLongAgo := !r.ended.IsZero() && r.err != nil && time.Since(r.ended) > retryFailed
		if r.version == version && !failedLongAgo {
			return r
		}
		r.stop() // the credentials were rotated, or the last try failed: start again
		delete(cs.remotes, key)
	}
	parent := cs.ctx
	if parent == nil {
		parent = context.Background() // not running yet: connect fails and says so
	}
	ctx, stop := context.WithCancel(parent)
	r := &remote{version: version, host: id.Host(), done: make(chan struct{}), stop: stop}
	if cs.remotes == nil {
		cs.remotes = map[types.NamespacedName]*remote{}
	}
	cs.remotes[key] = r
	running := cs.ctx != nil
	go func() {
		compute, err := cs.connect(ctx, id, localNamespace, running)
		if err != nil {
			stop()
		}
		cs.mu.Lock()
		r.compute, r.err, r.ended = compute, err, time.Now()
		cs.mu.Unlock()
		close(r.done)
	}()
	return r
}

// Forget stops the remote cache of the AnvilCluster key, which is gone (deleted, or moved to
// another management cluster by clusterctl): its identity is no longer this manager's to use.
func (cs *Computes) Forget(key types.NamespacedName) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if r, ok := cs.remotes[key]; ok {
		r.stop()
		delete(cs.remotes, key)
	}
}

// connect reaches the control plane of an identity and syncs its Machines; ctx ends the
// cache. Errors name the host and a class of failure, never the remote's own words: the
// condition must not become a way to read other hosts' answers.
func (cs *Computes) connect(ctx context.Context, id identity.Identity, localNamespace string, running bool) (Compute, error) {
	if !running {
		return Compute{}, errors.New("the manager is not running yet")
	}
	ns := id.Namespace
	// The cache's watches run long, so its configuration has no request timeout; the
	// clients the reconcilers use have one.
	watchCfg := id.Config()
	watchCfg.Dial = dialer(cs.AllowLoopback)
	c, err := cluster.New(watchCfg, func(o *cluster.Options) {
		o.Scheme = cs.Scheme
		o.Cache = cache.Options{NewInformer: watchstats.NewInformer("capi-remote"), DefaultNamespaces: map[string]cache.Config{ns: {}}}
	})
	if err != nil {
		return Compute{}, unreachable(id, err)
	}
	reqCfg := id.Config()
	reqCfg.Dial, reqCfg.Timeout = dialer(cs.AllowLoopback), remoteRequestTimeout
	reader, err := client.New(reqCfg, client.Options{Scheme: cs.Scheme})
	if err != nil {
		return Compute{}, unreachable(id, err)
	}
	writer, err := client.New(reqCfg, client.Options{Scheme: cs.Scheme, Cache: &client.CacheOptions{Reader: c.GetCache()}})
	if err != nil {
		return Compute{}, unreachable(id, err)
	}
	syncCtx, cancel := context.WithTimeout(ctx, remoteSyncTimeout)
	defer cancel()
	// An uncached list says at once whether the identity may see the Machines of its
	// namespace (a cache would retry a refusal until its timeout).
	if err := reader.List(syncCtx, &computev1alpha1.MachineList{}, client.InNamespace(ns), client.Limit(1)); err != nil {
		return Compute{}, unreachable(id, err)
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "remote anvil control plane cache stopped", "host", id.Host(), "namespace", ns)
		}
	}()
	if !c.GetCache().WaitForCacheSync(syncCtx) {
		return Compute{}, fmt.Errorf("the anvil Machines of namespace %s at %s did not sync within %s", ns, id.Host(), remoteSyncTimeout)
	}
	if err := cs.OnRemote(c, localNamespace); err != nil {
		return Compute{}, err
	}
	return Compute{Client: writer, Reader: reader, Namespace: ns, Remote: true}, nil
}

// setContext gives the remote caches the manager's context, which ends them.
func (cs *Computes) setContext(ctx context.Context) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.ctx = ctx
}
