package metal

import (
	"context"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// hostWatch records every Host status a watch delivers.
type hostWatch struct {
	w      watch.Interface
	done   chan struct{}
	mu     sync.Mutex
	states map[string][]metalv1alpha1.ProvisioningState
	all    []metalv1alpha1.HostStatus
}

// watchStates starts recording the provisioning states of the namespace's Hosts.
func watchStates(t *testing.T, ns string) *hostWatch {
	t.Helper()
	wc, err := client.NewWithWatch(rig.Env.Config, client.Options{Scheme: rig.Env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &metalv1alpha1.HostList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	hw := &hostWatch{w: w, done: make(chan struct{}), states: map[string][]metalv1alpha1.ProvisioningState{}}
	go func() {
		defer close(hw.done)
		for ev := range w.ResultChan() {
			h, ok := ev.Object.(*metalv1alpha1.Host)
			if !ok {
				continue
			}
			hw.mu.Lock()
			seen := hw.states[h.Name]
			if len(seen) == 0 || seen[len(seen)-1] != h.Status.ProvisioningState {
				hw.states[h.Name] = append(seen, h.Status.ProvisioningState)
			}
			hw.all = append(hw.all, *h.Status.DeepCopy())
			hw.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop() })
	return hw
}

// stop ends the watch and returns the distinct states seen per Host, in order.
func (hw *hostWatch) stop() map[string][]metalv1alpha1.ProvisioningState {
	hw.w.Stop()
	<-hw.done
	return hw.states
}

// statuses ends the watch and returns every status seen.
func (hw *hostWatch) statuses() []metalv1alpha1.HostStatus {
	hw.w.Stop()
	<-hw.done
	return hw.all
}
