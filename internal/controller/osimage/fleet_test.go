package osimage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

// With spec.architectures empty an OSImage builds for the fleet: a new arm64 pool adds an
// arm64 build whose amd64 inputs are those built before; the pool going away removes nothing.
func TestEmptyArchitecturesFollowTheFleetAndOnlyGrow(t *testing.T) {
	both, _ := setup(t) // one Ready pool: amd64
	ctx := context.Background()
	o := recipe("fleet", both)
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	first := waitBuild(t, o, 1)
	arm := &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "arm64-pool"}}
	if err := env.Client.Create(ctx, arm); err != nil {
		t.Fatal(err)
	}
	arm.Status.Architectures = []computev1alpha1.Architecture{"arm64"}
	arm.Status.Execution = []computev1alpha1.ArchitectureExecution{{Architecture: "arm64", Execution: computev1alpha1.ExecutionNative}}
	arm.Status.Conditions = []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, arm); err != nil {
		t.Fatal(err)
	}
	second := waitBuild(t, o, 2)
	if second.Name == first.Name || second.Spec.Architectures[0].InputHash != first.Spec.Architectures[0].InputHash {
		t.Errorf("after an arm64 pool: build %s %+v; want a new build keeping amd64's inputs %s", second.Name, second.Spec.Architectures, first.Spec.Architectures[0].InputHash)
	}
	if err := env.Client.Delete(ctx, arm); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	got := &imagesv1alpha1.OSImage{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Architectures) != 2 || got.Status.LatestBuild != second.Name {
		t.Errorf("after the arm64 pool went away: architectures %v, latest %s; want both kept and %s", got.Status.Architectures, got.Status.LatestBuild, second.Name)
	}
}

// waitBuild waits until the OSImage's latest build covers n architectures and returns it.
func waitBuild(t *testing.T, o *imagesv1alpha1.OSImage, n int) *imagesv1alpha1.OSImageBuild {
	t.Helper()
	b := &imagesv1alpha1.OSImageBuild{}
	eventually(t, fmt.Sprintf("OSImage %s: a build of %d architectures", o.Name, n), func() (bool, string) {
		got := &imagesv1alpha1.OSImage{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.LatestBuild != "" {
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: o.Namespace, Name: got.Status.LatestBuild}, b); err == nil && len(b.Spec.Architectures) == n {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %+v", got.Status)
	})
	return b
}
