package capi

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchStatus sends obj's status in one patch against base (obj as it was read), only when
// it changed. The resourceVersion is checked: a status decided on a stale object is not
// written over a newer one.
func patchStatus(ctx context.Context, c client.Client, obj, base client.Object) error {
	if equality.Semantic.DeepEqual(obj, base) {
		return nil
	}
	return c.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}
