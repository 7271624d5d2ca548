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
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
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
}

// namespaceFor is where the anvil Machine of an AnvilMachine in namespace ns goes.
func (c Compute) namespaceFor(ns string) string {
	if c.Namespace != "" {
		return c.Namespace
	}
	return ns
}

// remoteSyncTimeout bounds the first listing of a remote control plane's Machines: an
// identity that cannot list them is reported, not waited for forever.
const remoteSyncTimeout = 30 * time.Second

// Computes gives each AnvilCluster its Compute, starting one cache per remote identity
// (per Secret version) and telling the controllers to watch its Machines.
type Computes struct {
	Local  Compute
	Scheme *runtime.Scheme
	// APIReader reads identity Secrets here.
	APIReader client.Reader
	// OnRemote is called once for each new remote: the controllers add their watches of
	// its Machines, mapping them to objects in the AnvilCluster's namespace.
	OnRemote func(c cluster.Cluster, localNamespace string) error
	mu       sync.Mutex
	// ctx bounds the remote caches' lives: the manager's, once it runs.
	ctx     context.Context
	remotes map[types.NamespacedName]*remote
}

type remote struct {
	version string // of the identity Secret it was made from
	compute Compute
	stop    context.CancelFunc
}

// For is the Compute of an AnvilCluster (nil: this anvil).
func (cs *Computes) For(ctx context.Context, ac *infrav1.AnvilCluster) (Compute, error) {
	if ac == nil || ac.Spec.IdentityRef == nil {
		return cs.Local, nil
	}
	ref := ac.Spec.IdentityRef
	secret := &corev1.Secret{}
	if err := cs.APIReader.Get(ctx, client.ObjectKey{Namespace: ac.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return Compute{}, fmt.Errorf("identityRef Secret %s/%s not found", ac.Namespace, ref.Name)
		}
		return Compute{}, err
	}
	key := types.NamespacedName{Namespace: ac.Namespace, Name: ac.Name}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if r, ok := cs.remotes[key]; ok {
		if r.version == secret.ResourceVersion {
			return r.compute, nil
		}
		r.stop() // the credentials were rotated: start again with the new ones
		delete(cs.remotes, key)
	}
	r, err := cs.start(ctx, ac, secret)
	if err != nil {
		return Compute{}, fmt.Errorf("identityRef Secret %s/%s: %w", ac.Namespace, ref.Name, err)
	}
	if cs.remotes == nil {
		cs.remotes = map[types.NamespacedName]*remote{}
	}
	cs.remotes[key] = r
	return r.compute, nil
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

// start connects to the control plane of an identity Secret and syncs its Machines.
func (cs *Computes) start(ctx context.Context, ac *infrav1.AnvilCluster, secret *corev1.Secret) (*remote, error) {
	key := ac.Spec.IdentityRef.Key
	if key == "" {
		key = "value"
	}
	data, ok := secret.Data[key]
	if !ok {
		return nil, fmt.Errorf("no key %q", key)
	}
	cfg, ns, err := remoteConfig(data)
	if err != nil {
		return nil, err
	}
	c, err := cluster.New(cfg, func(o *cluster.Options) {
		o.Scheme = cs.Scheme
		o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}
	})
	if err != nil {
		return nil, err
	}
	// An uncached list says at once whether the identity may see the Machines of its
	// namespace (a cache would retry a refusal until its timeout).
	listCtx, cancel := context.WithTimeout(ctx, remoteSyncTimeout)
	defer cancel()
	if err := c.GetAPIReader().List(listCtx, &computev1alpha1.MachineList{}, client.InNamespace(ns), client.Limit(1)); err != nil {
		return nil, fmt.Errorf("listing Machines in namespace %s of the anvil control plane at %s: %w", ns, cfg.Host, err)
	}
	if cs.ctx == nil {
		return nil, errors.New("the manager is not running yet")
	}
	runCtx, stop := context.WithCancel(cs.ctx)
	go func() {
		if err := c.Start(runCtx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "remote anvil control plane cache stopped", "anvilCluster", ac.Name)
		}
	}()
	if !c.GetCache().WaitForCacheSync(listCtx) {
		stop()
		return nil, fmt.Errorf("the Machines of namespace %s at %s did not sync within %s", ns, cfg.Host, remoteSyncTimeout)
	}
	if err := cs.OnRemote(c, ac.Namespace); err != nil {
		stop()
		return nil, err
	}
	return &remote{version: secret.ResourceVersion, stop: stop,
		compute: Compute{Client: c.GetClient(), Reader: c.GetAPIReader(), Namespace: ns}}, nil
}

// remoteConfig reads a kubeconfig: its current context's cluster and user, and its
// namespace, which must be set (the anvil Machines go there).
func remoteConfig(kubeconfig []byte) (*rest.Config, string, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, "", fmt.Errorf("not a kubeconfig: %w", err)
	}
	// Read from the context itself: clientcmd's Namespace() calls a namespace a context sets
	// not explicit (only an override is), and says "default" for none.
	ns := ""
	if c := raw.Contexts[raw.CurrentContext]; c != nil {
		ns = c.Namespace
	}
	if ns == "" {
		return nil, "", errors.New("the kubeconfig's current context names no namespace: set it to the namespace the cluster's anvil Machines go to")
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("not a usable kubeconfig: %w", err)
	}
	return cfg, ns, nil
}

// setContext gives the remote caches the manager's context, which ends them.
func (cs *Computes) setContext(ctx context.Context) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.ctx = ctx
}
