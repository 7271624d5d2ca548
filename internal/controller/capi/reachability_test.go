package capi

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// A tenant chooses its cluster's endpoint: the provider dials it only where an identity
// kubeconfig's server may be (never link-local or cloud metadata, loopback only with the
// switch) and says nothing of one it will not dial; a listener on loopback counts the dials.
func TestEndpointDialGoesOnlyWhereATenantMayPoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			conn.Close()
		}
	}()
	loopbackPort := int32(ln.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct {
		name          string
		host          string
		port          int32
		allowLoopback bool
		// reason of the condition; "" for none. dialled: the listener saw a connection.
		reason  string
		dialled bool
	}{
		{"loopback without the switch", "127.0.0.1", loopbackPort, false, "", false},
		{"loopback with it", "127.0.0.1", loopbackPort, true, infrav1.ReasonEndpointAccepts, true},
		{"cloud metadata", "169.254.169.254", 80, true, "", false},
		{"link-local", "fe80::1", 6443, true, "", false},
		{"unspecified", "0.0.0.0", loopbackPort, true, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dials.Load()
			r := &AnvilMachineReconciler{Computes: &Computes{AllowLoopback: tc.allowLoopback}}
			am := &infrav1.AnvilMachine{Status: infrav1.AnvilMachineStatus{Conditions: []metav1.Condition{
				{Type: infrav1.ConditionReady, Status: metav1.ConditionTrue, Reason: infrav1.ReasonRunning, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))},
				// What an earlier reconcile said is dropped, not left standing.
				{Type: infrav1.ConditionControlPlaneEndpointReachable, Status: metav1.ConditionUnknown, Reason: infrav1.ReasonWaitingForAPIServer}}}}
			machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}}}
			cluster := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: tc.host, Port: tc.port}}}
			recheck := r.reachability(context.Background(), am, machine, cluster)
			got := apimeta.FindStatusCondition(am.Status.Conditions, infrav1.ConditionControlPlaneEndpointReachable)
			switch {
			case tc.reason == "" && (got != nil || recheck != 0):
				t.Errorf("condition %+v, recheck %s: want none, and no dial again", got, recheck)
			case tc.reason != "" && (got == nil || got.Reason != tc.reason || recheck != endpointRecheck):
				t.Errorf("condition %+v, recheck %s: want %s, again in %s", got, recheck, tc.reason, endpointRecheck)
			}
			time.Sleep(50 * time.Millisecond) // the listener's count
			if dialled := dials.Load() != before; dialled != tc.dialled {
				t.Errorf("%s dialled: %v, want %v", net.JoinHostPort(tc.host, strconv.Itoa(int(tc.port))), dialled, tc.dialled)
			}
		})
	}
}
