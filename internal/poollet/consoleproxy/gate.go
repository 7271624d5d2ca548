package consoleproxy

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// allowedFor is how long a caller found allowed is trusted without asking again; a
// refusal is never remembered, so a grant takes effect at once.
const allowedFor = 10 * time.Second

// maxRemembered bounds the remembered callers (one entry per token).
const maxRemembered = 1024

// Gate lets in the callers allowed to use the pool's consoles.
type Gate struct {
	Client kubernetes.Interface
	Pool   string

	mu      sync.Mutex
	allowed map[[sha256.Size]byte]time.Time
}

// Check authenticates the call's bearer token and authorizes its user: Unauthenticated or
// PermissionDenied otherwise, with a message that never repeats the token.
func (g *Gate) Check(ctx context.Context) error {
	token := bearer(ctx)
	if token == "" {
		return status.Error(codes.Unauthenticated, "a bearer token is needed")
	}
	key := sha256.Sum256([]byte(token))
	if g.remembered(key) {
		return nil
	}
	review, err := g.Client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return status.Errorf(codes.Unavailable, "the token could not be reviewed: %v", err)
	}
	if !review.Status.Authenticated {
		return status.Error(codes.Unauthenticated, "the token was not accepted by the cluster")
	}
	u := review.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := g.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: computev1alpha1.GroupVersion.Group, Resource: "machinepools", Subresource: "proxy",
				Name: g.Pool, Verb: "get",
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return status.Errorf(codes.Unavailable, "the caller's access could not be reviewed: %v", err)
	}
	if !sar.Status.Allowed {
		return status.Errorf(codes.PermissionDenied, "%s may not get machinepools/proxy of pool %s", u.Username, g.Pool)
	}
	g.remember(key)
	return nil
}

func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}

func (g *Gate) remembered(key [sha256.Size]byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.allowed[key]
	return ok && time.Now().Before(until)
}

func (g *Gate) remember(key [sha256.Size]byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.allowed == nil {
		g.allowed = map[[sha256.Size]byte]time.Time{}
	}
	now := time.Now()
	if len(g.allowed) >= maxRemembered {
		for k, until := range g.allowed {
			if !now.Before(until) {
				delete(g.allowed, k)
			}
		}
		if len(g.allowed) >= maxRemembered {
			clear(g.allowed)
		}
	}
	g.allowed[key] = now.Add(allowedFor)
}
