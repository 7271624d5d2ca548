package watchstats

import (
	"context"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/test/harness"
)

// cutter dials for a client and can cut every connection it made and refuse new ones, as
// an apiserver that went away would (connection refused: client-go then resumes a watch
// rather than relisting).
type cutter struct {
	mu     sync.Mutex
	conns  []net.Conn
	refuse bool
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

// cut closes every connection and refuses new ones until heal.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

func (c *cutter) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse = false
}

// A real apiserver expires a watch: the informer's watch is cut, etcd is compacted past
// the last resource version it saw, and its resumed watch is refused with 410. It relists,
// gets the change it missed, and the expiry and the relist are counted.
func TestRealExpiryRelistsAndIsCounted(t *testing.T) {
	// No watch cache, so watches are served from etcd, which the apiserver compacts every
	// second: a watch resumed from a resource version a few seconds old is expired.
	kubeconfig := harness.StartAPIServerWithFlags(t, map[string]string{"watch-cache": "false", "etcd-compaction-interval": "1s"})
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cuts := &cutter{}
	cutCfg := *cfg
	cutCfg.Dial = cuts.dial
	watcher, err := kubernetes.NewForConfig(&cutCfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "expiry"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	key := Key{"envtest-expiry", "ConfigMap"}
	lw := toolscache.NewListWatchFromClient(watcher.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
	inf := toolscache.NewSharedIndexInformer(Counted(lw, key.Client, key.Kind), &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("never synced")
	}
	value := func() string {
		o, ok, _ := inf.GetStore().GetByKey(ns + "/a")
		if !ok {
			return ""
		}
		return o.(*corev1.ConfigMap).Data["v"]
	}
	a, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"v": "seen"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the informer sees a", func() bool { return value() == "seen" })
	before := Read()[key]

	cuts.cut()
	a.Data["v"] = "missed"
	if _, err := admin.CoreV1().ConfigMaps(ns).Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "etcd compacted past a's creation", func() bool { return expired(ctx, admin, ns, a.ResourceVersion) })
	cuts.heal()

	waitFor(t, ctx, "the informer has the change its watch missed", func() bool { return value() == "missed" })
	waitFor(t, ctx, "the expiry and the relist counted", func() bool {
		c := Read()[key]
		return c.Relists > before.Relists && c.Ends["expired"] > before.Ends["expired"]
	})
	t.Logf("counted: %+v", Read()[key])
}

// expired says whether a watch from rv is refused as too old.
func expired(ctx context.Context, c kubernetes.Interface, ns, rv string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	w, err := c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
	}
	defer w.Stop()
	ev, ok := <-w.ResultChan()
	if !ok || ev.Type != watch.Error {
		return false
	}
	err = apierrors.FromObject(ev.Object)
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting: %s", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
