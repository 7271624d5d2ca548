package rbac

import (
	"context"
	"embed"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/secretaccess"
	"github.com/anvil-dev/anvil/internal/manifest"
)

//go:embed *.yaml broker/*.yaml capi/*.yaml capiprovider/*.yaml metal/*.yaml nodepoollet/*.yaml poollet/*.yaml tenant/*.yaml
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
	if err := ensureNamespaces(ctx, c, secretaccess.PoolletNamespace, computev1alpha1.PoolLeaseNamespace); err != nil {
		return rest.ImpersonationConfig{}, err
	}
	roles, err := Load("poollet")
	if err != nil {
		return rest.ImpersonationConfig{}, err
	}
	// The names a DaemonSet's poollet gives its own (internal/poollet/identity).
	return installIdentity(ctx, c, "poollet", roles, secretaccess.PoolletNamespace, secretaccess.ServiceAccountName(pool), secretaccess.BindingName(pool))
}

// MetalServiceAccount is the ServiceAccount a metal site (its Host controller and metal
// runtime, one process) runs as, in the site's infrastructure namespace.
const MetalServiceAccount = "anvil-metal-site"

// MetalUser is the user name of the metal site of namespace.
func MetalUser(namespace string) string {
	return "system:serviceaccount:" + namespace + ":" + MetalServiceAccount
}

// InstallMetal gives the metal site of namespace its own identity, as an operator adding a
// site would: the ServiceAccount <namespace>/anvil-metal-site, bound to the shipped
// ClusterRole anvil-metal and to the shipped Role anvil-metal placed in namespace (it
// ships in anvil-metal; its rules are the site's wherever its Hosts live). It returns
// that identity for impersonation (anvil dev, the tests). The site's poollet is another
// identity (InstallPoollet): it runs as its own process on a real site.
func InstallMetal(ctx context.Context, c client.Client, namespace string) (rest.ImpersonationConfig, error) {
	return installInNamespace(ctx, c, "metal", namespace, MetalServiceAccount)
}

// installInNamespace installs the identity of config/rbac/<dir> whose Roles act in one
// namespace of the operator's choosing: the ServiceAccount namespace/sa, the Roles placed
// in namespace (made if missing), the ClusterRoles bound as <sa>-<namespace>.
func installInNamespace(ctx context.Context, c client.Client, dir, namespace, sa string) (rest.ImpersonationConfig, error) {
	if err := ensureNamespaces(ctx, c, namespace); err != nil {
		return rest.ImpersonationConfig{}, err
	}
	roles, err := Load(dir)
	if err != nil {
		return rest.ImpersonationConfig{}, err
	}
	for _, r := range roles {
		if r.GetKind() == "Role" {
			r.SetNamespace(namespace)
		}
	}
	return installIdentity(ctx, c, dir, roles, namespace, sa, sa+"-"+namespace)
}

// CAPIProviderServiceAccount is the ServiceAccount the Cluster API provider (anvil
// capi-provider) runs as, in anvil's namespace (config/capi).
const CAPIProviderServiceAccount = "anvil-capi-provider"

// InstallCAPIProvider gives the Cluster API provider of namespace its own identity, as
// config/capi does: the ServiceAccount <namespace>/anvil-capi-provider, bound to the shipped
// ClusterRole anvil-capi-provider and to the shipped Role anvil-capi-provider (its leader
// election Lease) placed in namespace. It returns that identity for impersonation, for a
// provider run in the same process as an admin client (the tests).
func InstallCAPIProvider(ctx context.Context, c client.Client, namespace string) (rest.ImpersonationConfig, error) {
	return installInNamespace(ctx, c, "capiprovider", namespace, CAPIProviderServiceAccount)
}

// BrokerServiceAccountPrefix begins the name of every broker's ServiceAccount. The
// admission policy anvil-broker-scope (config/admission) matches it and reads the
// broker's upstream pool from the rest of the name.
const BrokerServiceAccountPrefix = "anvil-broker-"

// BrokerServiceAccount is the ServiceAccount the broker of upstream pool runs as, in its
// downstream namespace. It fails, naming the fix, when pool cannot be both part of a
// ServiceAccount name and the value of the label broker.anvil.dev/pool.
func BrokerServiceAccount(pool string) (string, error) {
	name := BrokerServiceAccountPrefix + pool
	if errs := validation.IsValidLabelValue(pool); pool == "" || len(errs) > 0 {
		return "", fmt.Errorf("broker pool %q: not a label value (%s): name the upstream MachinePool with at most 63 letters, digits, '-', '_' or '.'", pool, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("broker pool %q: ServiceAccount %s: %s", pool, name, strings.Join(errs, "; "))
	}
	return name, nil
}

// InstallBroker gives the broker of upstream pool, whose Machines live in namespace of
// this (downstream) cluster, its own identity, as an operator adding a broker would: the
// ServiceAccount <namespace>/anvil-broker-<pool>, bound to the shipped ClusterRole
// anvil-broker and to the shipped Role anvil-broker placed in namespace. It returns that
// identity for impersonation; brokeridentity.Identity turns it into a token.
func InstallBroker(ctx context.Context, c client.Client, namespace, pool string) (rest.ImpersonationConfig, error) {
	sa, err := BrokerServiceAccount(pool)
	if err != nil {
		return rest.ImpersonationConfig{}, err
	}
	return installInNamespace(ctx, c, "broker", namespace, sa)
}

func ensureNamespaces(ctx context.Context, c client.Client, names ...string) error {
	for _, ns := range names {
		if err := client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	return nil
}

// installIdentity applies roles (of config/rbac/<dir>) and binds them to the ServiceAccount
// saNamespace/saName, which it creates: RoleBindings named after the ServiceAccount, and
// ClusterRoleBindings named binding (unique in the cluster). It returns the identity.
func installIdentity(ctx context.Context, c client.Client, dir string, roles []*unstructured.Unstructured, saNamespace, saName, binding string) (rest.ImpersonationConfig, error) {
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: saName}}
	objs := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNamespace, Name: saName}}}
	for _, r := range roles {
		objs = append(objs, r)
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: r.GetKind(), Name: r.GetName()}
		switch r.GetKind() {
		case "ClusterRole":
			objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: binding}, Subjects: subject, RoleRef: ref})
		case "Role":
			objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: r.GetNamespace(), Name: "anvil-" + saName}, Subjects: subject, RoleRef: ref})
		default:
			return rest.ImpersonationConfig{}, fmt.Errorf("config/rbac/%s: unexpected kind %s", dir, r.GetKind())
		}
	}
	for _, o := range objs {
		if _, isSA := o.(*corev1.ServiceAccount); isSA {
			// Applying a ServiceAccount would drop the token Secrets others added to it.
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return rest.ImpersonationConfig{}, fmt.Errorf("creating ServiceAccount %s: %w", saName, err)
			}
			continue
		}
		if err := manifest.Apply(ctx, c, o); err != nil {
			return rest.ImpersonationConfig{}, fmt.Errorf("installing %T %s: %w", o, o.GetName(), err)
		}
	}
	return rest.ImpersonationConfig{UserName: "system:serviceaccount:" + saNamespace + ":" + saName, Groups: []string{
		"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"}}, nil
}
