package capi

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// ownerName is the name of obj's owner of Cluster API's core group and kind, or "" when
// Cluster API has not set one yet. The API version is not compared: Cluster API may
// write any version it serves.
func ownerName(obj metav1.Object, kind string) string {
	for _, ref := range obj.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == clusterv1.GroupVersion.Group && ref.Kind == kind {
			return ref.Name
		}
	}
	return ""
}

// getOptional reads key into obj; ok is false when it does not exist.
func getOptional(ctx context.Context, r client.Reader, key client.ObjectKey, obj client.Object) (ok bool, err error) {
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// clusterOf reads the Cluster named name in namespace and its AnvilCluster, each nil if it
// does not exist (or the Cluster's infrastructure is not an AnvilCluster).
func clusterOf(ctx context.Context, r client.Reader, namespace, name string) (*clusterv1.Cluster, *infrav1.AnvilCluster, error) {
	if name == "" {
		return nil, nil, nil
	}
	cluster := &clusterv1.Cluster{}
	if ok, err := getOptional(ctx, r, client.ObjectKey{Namespace: namespace, Name: name}, cluster); !ok {
		return nil, nil, err
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.APIGroup != infrav1.GroupVersion.Group || ref.Kind != "AnvilCluster" {
		return cluster, nil, nil
	}
	ac := &infrav1.AnvilCluster{}
	if ok, err := getOptional(ctx, r, client.ObjectKey{Namespace: namespace, Name: ref.Name}, ac); !ok {
		return cluster, nil, err
	}
	return cluster, ac, nil
}

// paused says whether Cluster API asks the provider to leave obj alone: the Cluster is
// paused (as `clusterctl move` does) or obj carries the paused annotation.
func paused(cluster *clusterv1.Cluster, obj metav1.Object) bool {
	if _, ok := obj.GetAnnotations()[clusterv1.PausedAnnotation]; ok {
		return true
	}
	return cluster != nil && cluster.Spec.Paused != nil && *cluster.Spec.Paused
}

// pausedCondition is the Paused condition the contract asks every provider object to carry.
func pausedCondition(isPaused bool, generation int64) metav1.Condition {
	c := metav1.Condition{Type: infrav1.ConditionPaused, Status: metav1.ConditionFalse, Reason: infrav1.ReasonNotPaused, ObservedGeneration: generation}
	if isPaused {
		c.Status, c.Reason = metav1.ConditionTrue, infrav1.ReasonPaused
		c.Message = "the Cluster is paused (spec.paused) or the object carries " + clusterv1.PausedAnnotation
	}
	return c
}
