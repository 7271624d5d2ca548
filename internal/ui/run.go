package ui

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options are what one anvil ui serves.
type Options struct {
	// Config is the user's: everything is read with it.
	Config *rest.Config
	// Namespaces are where to look when the user may not list a kind in all of them.
	Namespaces []string
	// Address to listen on: loopback only.
	Address string
}

// UI is a started anvil ui.
type UI struct {
	// URL is the address to open, with the session's token.
	URL    string
	server *Server
	lis    net.Listener
}

// Start asks the API server what the user may see, lists and watches it, and listens;
// Serve then serves until ctx ends (the watches end with ctx too).
func Start(ctx context.Context, o Options) (*UI, error) {
	host, _, err := net.SplitHostPort(o.Address)
	if err != nil {
		return nil, fmt.Errorf("--address %q: %w", o.Address, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--address %q: anvil ui serves your credentials' view of the fleet and listens on loopback only", o.Address)
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	user := ""
	if review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
		user = review.Status.UserInfo.Username
	}
	scope, err := DecideScope(ctx, cs, o.Namespaces)
	if err != nil {
		return nil, err
	}
	feed := NewFeed()
	if err := Watch(ctx, o.Config, scope, feed); err != nil {
		return nil, err
	}
	token := make([]byte, 24)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", o.Address)
	if err != nil {
		return nil, err
	}
	s := &Server{Feed: feed, Scope: scope, User: user, Clientset: cs, Config: o.Config, Token: hex.EncodeToString(token)}
	return &UI{URL: "http://" + lis.Addr().String() + s.Path(), server: s, lis: lis}, nil
}

// Serve serves the pages until ctx ends.
func (u *UI) Serve(ctx context.Context) error { return u.server.Serve(ctx, u.lis) }
