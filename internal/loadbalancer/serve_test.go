package loadbalancer

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/netswitch"
	"github.com/anvil-dev/anvil/internal/netswitch/netnstest"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

const (
	network = "nodes"
	waitFor = 30 * time.Second
)

var (
	subnet  = netip.MustParsePrefix("10.200.0.0/24")
	gateway = netip.MustParseAddr("10.200.0.1")
	host    = netip.MustParseAddr("127.0.0.1")
)

// fixture is a switch, the controller and server on a manager, and the namespaces' guests.
type fixture struct {
	t      *testing.T
	sw     *netswitch.Switch
	swDir  string
	ports  Ports
	cancel context.CancelFunc
}

func segmentName(namespace string) string { return "lb-" + namespace }

// newFixture starts a switch and a load balancer controller serving network, with ports
// from a range of its own (a free loopback port and the nine after it).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	swDir := filepath.Join(t.TempDir(), "sw")
	sw, err := netswitch.New(swDir, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sw.Close() })
	first := uint16(harness.FreePort(t))
	f := &fixture{t: t, sw: sw, swDir: swDir, ports: Ports{First: first, Last: first + 9}}
	f.start()
	return f
}

// start runs a controller and a server of their own: a restart of the process serving
// load balancers.
func (f *fixture) start() {
	t := f.t
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: new(true)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reconciler{
		Client: mgr.GetClient(),
		Server: NewServer(ctx, host, f.sw, testr.New(t)),
		Segments: map[string]Segment{network: {Subnet: subnet, Gateway: gateway,
			Name: segmentName}},
		Ports:  f.ports,
		Events: events.New(mgr.GetEventRecorder("loadbalancer"), nil),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	f.cancel = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(f.cancel)
}

// guest is a real Linux network stack (a network namespace) on a segment.
type guest struct {
	netns string
	api   net.Listener // its port 6443
}

// guest is a real Linux network stack on namespace ns's segment at ip, answering every TCP
// connection to port 6443 with its name.
func (f *fixture) guest(ns, name string, ip netip.Addr, mac net.HardwareAddr) guest {
	t := f.t
	t.Helper()
	netns := fmt.Sprintf("anvil-lb-%d-%s", os.Getpid(), name)
	netnstest.AddNamespace(t, netns)
	tap := netnstest.OpenTAP(t, netns, "tap0")
	netnstest.InNS(t, netns, "ip", "link", "set", "tap0", "address", mac.String(), "up")
	netnstest.InNS(t, netns, "ip", "addr", "add", netip.PrefixFrom(ip, subnet.Bits()).String(), "dev", "tap0")
	peer := filepath.Join(t.TempDir(), "nic")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: peer, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	path, _, err := f.sw.Attach(netswitch.Segment{Name: segmentName(ns), Subnet: subnet, Gateway: gateway},
		netswitch.Port{Peer: peer, MAC: mac, IP: ip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.sw.Detach(peer) })
	netnstest.RelayFrames(t, tap, conn, path)
	l := netnstest.Listen(t, netns, ":6443")
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s\n", name)
			c.Close()
		}
	}()
	return guest{netns: netns, api: l}
}

// machine makes a running anvil Machine in ns with labels and the segment address ip.
func machine(t *testing.T, ns, name string, labels map[string]string, ip string) *computev1alpha1.Machine {
	t.Helper()
	ctx := context.Background()
	m := &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
			Image: "registry.example/os:1"},
	}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Status.State = computev1alpha1.MachineStateRunning
	m.Status.Addresses = []computev1alpha1.MachineAddress{{Type: "InternalIP", Address: ip}, {Type: "InternalIP", Address: "10.0.2.15"}}
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func loadBalancer(t *testing.T, ns, name, net string, selector map[string]string) *computev1alpha1.LoadBalancer {
	t.Helper()
	lb := &computev1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: computev1alpha1.LoadBalancerSpec{Network: net, Selector: selector, Port: 6443}}
	if err := env.Client.Create(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	// Before the test's controller stops: the next test's must not serve it.
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.Client.Delete(context.Background(), lb)) })
	return lb
}

// waitStatus waits until the load balancer's status satisfies ok, and returns it.
func waitStatus(t *testing.T, lb *computev1alpha1.LoadBalancer, what string, ok func(computev1alpha1.LoadBalancerStatus) bool) computev1alpha1.LoadBalancerStatus {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	got := &computev1alpha1.LoadBalancer{}
	for time.Now().Before(deadline) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(lb), got); err != nil {
			t.Fatal(err)
		}
		if ok(got.Status) {
			return got.Status
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("LoadBalancer %s/%s: no %s within %s; status %+v", lb.Namespace, lb.Name, what, waitFor, got.Status)
	return got.Status
}

func ready(st computev1alpha1.LoadBalancerStatus) *metav1.Condition {
	return apimeta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionReady)
}

// answer connects (through dial) and returns the line the far end says, or the error.
func answer(dial func() (net.Conn, error)) (string, error) {
	c, err := dial()
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func fromHost(addr string) func() (net.Conn, error) {
	return func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }
}

func fromGuest(netns, addr string) func() (net.Conn, error) {
	return func() (net.Conn, error) { return netnstest.Dial(netns, addr, 5*time.Second) }
}

// eventually retries check until it returns nil or waitFor passes.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

func says(dial func() (net.Conn, error), want ...string) func() error {
	return func() error {
		got, err := answer(dial)
		if err != nil {
			return err
		}
		for _, w := range want {
			if got == w {
				return nil
			}
		}
		return fmt.Errorf("answered %q, want one of %q", got, want)
	}
}
