package consoleproxy

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/apiauth"
)

// Gate lets in the callers allowed to use the pool's consoles: get on its
// machinepools/proxy.
type Gate struct {
	Auth *apiauth.Delegated
	Pool string
}

// Check authenticates the call's bearer token and authorizes its user: Unauthenticated,
// PermissionDenied or Unavailable otherwise, with a message that never repeats the token.
func (g *Gate) Check(ctx context.Context) error {
	token := bearer(ctx)
	if token == "" {
		return status.Error(codes.Unauthenticated, "a bearer token is needed")
	}
	// The reviews read a request's Authorization header, as an aggregated server's do.
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	r.Header.Set("Authorization", "Bearer "+token)
	err = g.Auth.Check(r, authorizer.AttributesRecord{Verb: "get", APIGroup: computev1alpha1.GroupVersion.Group,
		Resource: "machinepools", Subresource: "proxy", Name: g.Pool, ResourceRequest: true})
	var refusal *apiauth.Refusal
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refusal) && refusal.Unauthenticated:
		return status.Error(codes.Unauthenticated, "the token was not accepted by the cluster")
	case errors.As(err, &refusal):
		return status.Error(codes.PermissionDenied, refusal.Message)
	}
	return status.Error(codes.Unavailable, err.Error())
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
