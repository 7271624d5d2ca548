package capi

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/controller/requeue"
)

// conflictOr turns a write conflict into a prompt retry (the object changed under the
// decision, which is made again on the new one) and returns any other error.
func conflictOr(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return requeue.AfterConflict(), nil
	}
	return ctrl.Result{}, err
}

func withGeneration(c metav1.Condition, gen int64) metav1.Condition {
	c.ObservedGeneration = gen
	return c
}

func schemaGK(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }

func ignoreForbidden(err error) error {
	if apierrors.IsForbidden(err) {
		return nil
	}
	return err
}
