package rbac

import (
	"context"
	"embed"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/secretaccess"
	"github.com/anvil-dev/anvil/internal/manifest"
)

//go:embed *.yaml metal/*.yaml poollet/*.yaml tenant/*.yaml
var files embed.FS

// Load returns the objects of config/rbac/<dir> ("" for the manager's), files in name
// order.
func Load(dir string) ([]*unstructured.Unstructured, error) {
	if dir == "" {
		dir = "."
	}
	objs, err := manifest.ReadFS(files, dir)
	if err != nil {
		return nil, fmt.Errorf("config/rbac/%s: %w", dir, err)
	}
	return objs, nil
}

// PoolletUser is the user name of pool's poollet: its ServiceAccount's. The admission
// policy anvil-poollet-scope (config/admission) reads the pool from it.
func PoolletUser(pool string) string {
	return "system:serviceaccount:" + secretaccess.PoolletNamespace + ":" + secretaccess.ServiceAccountName(pool)
}

// InstallPoollet gives pool's poollet its own identity, as an operator adding a pool
// would: the ServiceAccount anvil-system/poollet-<pool>, bound to the shipped poollet
// roles (made to match these). It returns that identity for impersonation, for a
// poollet run in the same process as an admin client (anvil dev).
func InstallPoollet(ctx context.Context, c client.Client, pool string) (rest.ImpersonationConfig, error) {
	for _, ns := range []string{secretaccess.PoolletNamespace, computev1alpha1.PoolLeaseNamespace} {
		if err := client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			return rest.ImpersonationConfig{}, fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	roles, err := Load("poollet")
	if err != nil {
		return rest.ImpersonationConfig{}, err
	}
	name := secretaccess.ServiceAccountName(pool)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: secretaccess.PoolletNamespace, Name: name}}
	objs := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: name}}}
	for _, r := range roles {
		objs = append(objs, r)
		meta := metav1.ObjectMeta{Namespace: r.GetNamespace(), Name: "anvil-" + name}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: r.GetKind(), Name: r.GetName()}
		switch r.GetKind() {
		case "ClusterRole":
			objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subject, RoleRef: ref})
		case "Role":
			objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subject, RoleRef: ref})
		default:
			return rest.ImpersonationConfig{}, fmt.Errorf("config/rbac/poollet: unexpected kind %s", r.GetKind())
		}
	}
	for _, o := range objs {
		if _, isSA := o.(*corev1.ServiceAccount); isSA {
			// Applying a ServiceAccount would drop the token Secrets others added to it.
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return rest.ImpersonationConfig{}, fmt.Errorf("creating ServiceAccount %s: %w", name, err)
			}
			continue
		}
		if err := manifest.Apply(ctx, c, o); err != nil {
			return rest.ImpersonationConfig{}, fmt.Errorf("installing %T %s: %w", o, o.GetName(), err)
		}
	}
	return rest.ImpersonationConfig{UserName: PoolletUser(pool), Groups: []string{
		"system:serviceaccounts", "system:serviceaccounts:" + secretaccess.PoolletNamespace, "system:authenticated"}}, nil
}
