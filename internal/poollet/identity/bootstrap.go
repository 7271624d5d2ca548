package identity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/secretaccess"
)

const (
	// NodePoolletServiceAccount is the DaemonSet's shared ServiceAccount, in
	// secretaccess.PoolletNamespace.
	NodePoolletServiceAccount = "anvil-node-poollet"
	// RoleName names the shipped ClusterRole and Role of every poollet (config/rbac/poollet).
	RoleName = "anvil-poollet"
)

// Label marks what a DaemonSet's poollet made for its node (Objects): kubectl apply -k did
// not make them, so kubectl delete -k leaves them; remove them with
// kubectl delete clusterrolebinding,rolebinding,serviceaccount -A -l anvil.dev/node-poollet.
const Label = "anvil.dev/node-poollet"

// Objects are what pool's poollet identity is made of: its ServiceAccount, the
// ClusterRoleBinding to the ClusterRole anvil-poollet and the RoleBinding to the Role
// anvil-poollet in the Lease namespace.
func Objects(pool string) []client.Object {
	sa := secretaccess.ServiceAccountName(pool)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: secretaccess.PoolletNamespace, Name: sa}}
	labels := map[string]string{Label: pool}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: sa, Labels: labels}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: secretaccess.BindingName(pool), Labels: labels},
			Subjects:   subject,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RoleName},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: computev1alpha1.PoolLeaseNamespace, Name: secretaccess.BindingName(pool), Labels: labels},
			Subjects:   subject,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: RoleName},
		},
	}
}

// Ensure creates pool's poollet identity where missing. It only creates: an object that
// exists is left as it is (the admission policy lets the shared identity change nothing),
// so an operator's own binding of the same name wins.
func Ensure(ctx context.Context, c client.Client, pool string) error {
	for _, o := range Objects(pool) {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s for the poollet of pool %s: %w", o, client.ObjectKeyFromObject(o), pool, err)
		}
	}
	return nil
}
