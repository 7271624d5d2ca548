package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// NodeBootstrapGroup is the group every bootstrap token CreateBootstrapToken makes puts its
// user in (beside system:bootstrappers); the RBAC of a Workload control plane lets that
// group register nodes, as kubeadm's system:bootstrappers:kubeadm:default-node-token.
const NodeBootstrapGroup = "system:bootstrappers:anvil"

// nodeBootstrapBindings are kubeadm's bindings for node TLS bootstrap (`kubeadm init`'s
// bootstrap-token phase), to the ClusterRoles every apiserver ships: the bootstrappers may
// create and read certificate requests, their node client requests are approved by
// kube-controller-manager, and so are a node's renewals of its own certificate. The last
// lets the apiserver use a kubelet's API (logs, exec), as kubeadm's
// kubeadm:apiserver-kubelet-client.
var nodeBootstrapBindings = []struct{ name, role, kind, subject string }{
	{"anvil:kubelet-bootstrap", "system:node-bootstrapper", rbacv1.GroupKind, NodeBootstrapGroup},
	{"anvil:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", rbacv1.GroupKind, NodeBootstrapGroup},
	{"anvil:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", rbacv1.GroupKind, "system:nodes"},
	{"anvil:apiserver-kubelet-client", "system:kubelet-api-admin", rbacv1.UserKind, kubeletClientUser},
}

// ensureNodeBootstrapRBAC creates the ClusterRoleBindings of nodeBootstrapBindings that are
// missing (a restarted control plane has them already).
func ensureNodeBootstrapRBAC(ctx context.Context, cs kubernetes.Interface) error {
	for _, b := range nodeBootstrapBindings {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: b.kind, Name: b.subject}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRoleBinding %s: %w", b.name, err)
		}
	}
	return nil
}

// CreateBootstrapToken makes a bootstrap token that expires at expires (the apiserver
// refuses it after that, and kube-controller-manager's token cleaner deletes it) and
// returns it as "<id>.<secret>". It is the kube-system Secret bootstrap-token-<id> that
// kubeadm makes: usable for authentication only, its user in NodeBootstrapGroup.
func CreateBootstrapToken(ctx context.Context, cs kubernetes.Interface, expires time.Time) (string, error) {
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", err
	}
	secret, err := bootstrapTokenSecret(token, expires)
	if err != nil {
		return "", err
	}
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating the bootstrap token Secret: %w", err)
	}
	return token, nil
}

// bootstrapTokenSecret is the Secret of token (id.secret), in the format the apiserver's
// bootstrap token authenticator reads.
func bootstrapTokenSecret(token string, expires time.Time) (*corev1.Secret, error) {
	if !bootstraputil.IsValidBootstrapToken(token) {
		return nil, fmt.Errorf("not a bootstrap token (want [a-z0-9]{6}.[a-z0-9]{16})")
	}
	id, secret, _ := strings.Cut(token, ".")
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(id), Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		StringData: map[string]string{
			bootstrapapi.BootstrapTokenIDKey:               id,
			bootstrapapi.BootstrapTokenSecretKey:           secret,
			bootstrapapi.BootstrapTokenExpirationKey:       expires.UTC().Format(time.RFC3339),
			bootstrapapi.BootstrapTokenUsageAuthentication: "true",
			bootstrapapi.BootstrapTokenExtraGroupsKey:      NodeBootstrapGroup,
			bootstrapapi.BootstrapTokenDescriptionKey:      "anvil: registers a node of a workload cluster",
		},
	}, nil
}
