package broker

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// link is a TCP relay on loopback to the downstream API server that can be cut and
// restored on the same address: the broker's only way to the site.
type link struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	l      net.Listener
	conns  []net.Conn
}

func newLink(t *testing.T, target string) *link {
	k := &link{t: t, target: target, addr: "127.0.0.1:0"}
	k.restore()
	k.addr = k.l.Addr().String()
	t.Cleanup(k.cut)
	return k
}

func (k *link) restore() {
	l, err := net.Listen("tcp", k.addr)
	if err != nil {
		k.t.Fatal(err)
	}
	k.mu.Lock()
	k.l = l
	k.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", k.target)
			if err != nil {
				c.Close()
				continue
			}
			k.mu.Lock()
			k.conns = append(k.conns, c, up)
			k.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut closes the listener and every connection through it.
func (k *link) cut() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.l.Close()
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

// TestSiteUnreachableKeepsTheLastStatus: with the link to the site cut, the machine stays
// listed as it was, saying the site is unreachable; nothing is deleted; once the link is
// back it says the site answers.
func TestSiteUnreachableKeepsTheLastStatus(t *testing.T) {
	s := newSite(t, "unreachable")
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	k := newLink(t, u.Host)
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://" + k.addr
	cl, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.startWith(cfg, cl, func(o *Options) { o.ProbeInterval, o.UnreachableAfter = 100e6, 500e6 })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	resp, err := r.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: upstream("8f4a3d0e-0000-4000-8000-000000000006")})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Machine.Metadata.Id
	site := func() (*mriv1alpha1.Machine, *mriv1alpha1.Condition) {
		l, err := r.ListMachines(bg(t), &mriv1alpha1.ListMachinesRequest{Id: id})
		if err != nil || len(l.Machines) != 1 {
			t.Fatalf("machine %s: %v %v", id, l, err)
		}
		for _, c := range l.Machines[0].Status.Conditions {
			if c.Type == mapping.ConditionSiteReachable {
				return l.Machines[0], c
			}
		}
		t.Fatalf("no %s condition: %v", mapping.ConditionSiteReachable, l.Machines[0].Status)
		return nil, nil
	}
	eventually(t, "ran downstream", func() bool {
		m, c := site()
		return m.Status.State == mriv1alpha1.MachineState_MACHINE_STATE_RUNNING && c.Status
	})
	k.cut()
	eventually(t, "said the site is unreachable", func() bool {
		m, c := site()
		return !c.Status && c.Reason == mapping.ReasonSiteUnreachable && m.Status.State == mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	})
	k.restore()
	eventually(t, "said the site answers again", func() bool {
		m, c := site()
		return c.Status && m.Status.State == mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	})
}
