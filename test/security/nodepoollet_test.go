package security

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/controller/secretaccess"
	"github.com/anvil-dev/anvil/internal/poollet/identity"
)

// nodePod is a Pod of the hypervisor DaemonSet on node (made with it): its ServiceAccount
// is the shared anvil-node-poollet. envtest runs no kubelet; the Pod only has to exist for
// the API server to bind tokens to it and put its node in them.
func nodePod(t *testing.T, node string) *corev1.Pod {
	t.Helper()
	create(t, env.Client, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: "poollet-" + node},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: identity.NodePoolletServiceAccount,
			Containers: []corev1.Container{{Name: "poollet", Image: "anvil"}}},
	}
	create(t, env.Client, p)
	return p
}

// podToken is a token of the DaemonSet's ServiceAccount bound to pod, as the kubelet
// projects into it (nil: not bound to anything).
func podToken(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: identity.NodePoolletServiceAccount}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if pod != nil {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	if err := env.Client.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("a token of %s: %v", sa.Name, err)
	}
	return tr.Status.Token
}

// The attack: the hypervisor DaemonSet's token from node n1 (a hypervisor host,
// compromised) tries to become another node's poollet, to mint long or unbound poollet
// tokens, to bind the poollet role to an identity of its own or a stronger role to its
// poollet, and to undo an identity. Without anvil-node-poollet-scope, RBAC alone lets it
// create any ServiceAccount, any binding to anvil-poollet and any token in anvil-system.
// The API server refuses each, and still lets it make and use its own node's pool identity.
func TestNodePoolletBecomesOnlyItsNodesPoollet(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "nodes")
	manager(t) // anvil-system exists and the manager's roles are installed
	for _, n := range []string{secretaccess.PoolletNamespace, computev1alpha1.PoolLeaseNamespace} {
		if err := client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"poollet", "nodepoollet"} {
		if err := env.InstallRBAC(ctx, dir); err != nil {
			t.Fatal(err)
		}
	}
	n1, n2, n3 := "n1-"+ns, "n2-"+ns, "n3-"+ns
	p1 := nodePod(t, n1)
	nodePod(t, n2)
	// Node n2's poollet identity exists (its own DaemonSet Pod made it): the attacks below
	// go for it, not for a missing object.
	if err := identity.Ensure(ctx, env.Client, n2); err != nil {
		t.Fatal(err)
	}
	node := serviceAccountClient(t, podToken(t, p1))

	// Its own pool identity: made, and a working, pool-scoped poollet.
	cfg, err := identity.Config(ctx, tokenConfig(podToken(t, p1)), identity.ModeNode, n1, n1)
	if err != nil {
		t.Fatalf("node %s making its own poollet identity: %v", n1, err)
	}
	poollet, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := poollet.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:anvil-system:poollet-" + n1; review.Status.UserInfo.Username != want {
		t.Errorf("the poollet acts as %q, want %q", review.Status.UserInfo.Username, want)
	}
	if err := poollet.Create(ctx, &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: n1}}); err != nil {
		t.Errorf("the poollet of %s creating its MachinePool: %v", n1, err)
	}
	if err := poollet.Create(ctx, &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: n2}}); !apierrors.IsForbidden(err) {
		t.Errorf("the poollet of %s creating MachinePool %s: %v, want Forbidden", n1, n2, err)
	}
	// A second start finds its identity made and goes on.
	if _, err := identity.Config(ctx, tokenConfig(podToken(t, p1)), identity.ModeNode, n1, n1); err != nil {
		t.Errorf("node %s starting again: %v", n1, err)
	}

	token := func(sa string, bound *authenticationv1.BoundObjectReference, seconds int64) func(context.Context) error {
		return func(ctx context.Context) error {
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(seconds), BoundObjectRef: bound}}
			return node.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: sa}}, tr)
		}
	}
	binding := func(name string, role rbacv1.RoleRef, subject rbacv1.Subject) func(context.Context) error {
		return func(ctx context.Context) error {
			return node.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: role, Subjects: []rbacv1.Subject{subject}})
		}
	}
	poolletRole := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: identity.RoleName}
	poolletOf := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: secretaccess.PoolletNamespace, Name: secretaccess.ServiceAccountName(n)}
	}
	attempts := []struct {
		name string
		do   func(context.Context) error
	}{
		{"the ServiceAccount of a node that has none yet", func(ctx context.Context) error {
			return node.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: secretaccess.ServiceAccountName(n3)}})
		}},
		{"a token of another node's poollet", token(secretaccess.ServiceAccountName(n2), nodeRef(n1), 3600)},
		{"a token of another node's poollet bound to that node", token(secretaccess.ServiceAccountName(n2), nodeRef(n2), 3600)},
		{"a token of its poollet bound to nothing", token(secretaccess.ServiceAccountName(n1), nil, 3600)},
		{"a token of its poollet bound to another node", token(secretaccess.ServiceAccountName(n1), nodeRef(n2), 3600)},
		{"a token of its poollet bound to a Secret", token(secretaccess.ServiceAccountName(n1),
			&authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: "any"}, 3600)},
		{"a token of its poollet valid a day", token(secretaccess.ServiceAccountName(n1), nodeRef(n1), 86400)},
		{"a token of the manager", token("anvil-controller-manager", nodeRef(n1), 3600)},
		{"the poollet role for another node's poollet", binding(secretaccess.BindingName(n3), poolletRole, poolletOf(n3))},
		{"the poollet role for an identity of its own", binding("anvil-poollet-extra-"+n1, poolletRole,
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "attacker"})},
		{"the manager's role for its poollet", binding("anvil-poollet-escalate-"+n1,
			rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "anvil-manager"}, poolletOf(n1))},
		{"the Lease role for another node's poollet", func(ctx context.Context) error {
			return node.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: computev1alpha1.PoolLeaseNamespace, Name: secretaccess.BindingName(n3)},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: identity.RoleName}, Subjects: []rbacv1.Subject{poolletOf(n3)}})
		}},
		{"deleting its poollet's binding", func(ctx context.Context) error {
			return node.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: secretaccess.BindingName(n1)}})
		}},
	}
	for _, a := range attempts {
		if err := a.do(ctx); !apierrors.IsForbidden(err) {
			t.Errorf("node %s: %s: %v, want Forbidden", n1, a.name, err)
		}
	}
	// The policy names the node and what it may do; RBAC would name neither.
	err = token(secretaccess.ServiceAccountName(n2), nodeRef(n1), 3600)(ctx)
	if err == nil || !strings.Contains(err.Error(), "node poollet of node "+n1) {
		t.Errorf("refusal of another node's token: %v, want the policy's message naming node %s", err, n1)
	}
	// A token of the DaemonSet's identity bound to no Pod names no node: it makes nothing.
	unbound := serviceAccountClient(t, podToken(t, nil))
	err = unbound.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: secretaccess.ServiceAccountName(n3)}})
	if !apierrors.IsForbidden(err) {
		t.Errorf("an unbound node-poollet token making a poollet ServiceAccount: %v, want Forbidden", err)
	}
}

// serviceAccountClient reaches the test's API server with token alone.
func serviceAccountClient(t *testing.T, token string) client.Client {
	t.Helper()
	c, err := client.New(tokenConfig(token), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func nodeRef(node string) *authenticationv1.BoundObjectReference {
	return &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node}
}

// The attack: the token of a bare-metal site's Pod (anvil-metal-site; its Ironic runs on the
// node's network), leaked, mints a token of its pool's poollet that outlives the Pod and
// the node: unbound, bound elsewhere or valid a day. RBAC lets the site create any token of
// that ServiceAccount (without the policy, three of the four go through);
// anvil-metal-site-token-scope holds each to its own Node and an hour, as the site's
// poollet requests them.
func TestMetalSiteMintsOnlyShortNodeBoundPoolletTokens(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "site")
	pool := "site-" + ns
	if _, err := rbac.InstallMetal(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.InstallPoollet(ctx, env.Client, pool); err != nil {
		t.Fatal(err)
	}
	// As config/metal-site ships it: the site may create tokens of its pool's poollet alone.
	create(t, env.Client,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: "token-" + ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"},
				ResourceNames: []string{secretaccess.ServiceAccountName(pool)}, Verbs: []string{"create"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: "token-" + ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "token-" + ns},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: rbac.MetalServiceAccount}}})
	node, other := "site-node-"+ns, "other-node-"+ns
	create(t, env.Client, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site"},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: rbac.MetalServiceAccount, Containers: []corev1.Container{{Name: "site", Image: "anvil-metal"}}}}
	create(t, env.Client, pod)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	if err := env.Client.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rbac.MetalServiceAccount}}, tr); err != nil {
		t.Fatal(err)
	}
	site := serviceAccountClient(t, tr.Status.Token)
	request := func(bound *authenticationv1.BoundObjectReference, seconds int64) error {
		return site.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: secretaccess.ServiceAccountName(pool)}},
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(seconds), BoundObjectRef: bound}})
	}
	if err := request(nodeRef(node), 3600); err != nil {
		t.Errorf("the site requesting its poollet's token as the poollet does: %v", err)
	}
	for name, err := range map[string]error{
		"unbound":               request(nil, 3600),
		"bound to another node": request(nodeRef(other), 3600),
		"valid a day":           request(nodeRef(node), 86400),
		"of another ServiceAccount": site.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secretaccess.PoolletNamespace, Name: "anvil-controller-manager"}},
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)), BoundObjectRef: nodeRef(node)}}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the site's token minting a poollet token %s: %v, want Forbidden", name, err)
		}
	}
}
