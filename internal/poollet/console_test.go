package poollet_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/poollet"
)

// The pool's status says where its console endpoint is and which CA signed its
// certificate: a TLS client trusting only that CA reaches it (the callers it lets in are
// test/security's TestPoolConsoleEndpointLetsInOnlyItsPoolsProxyUsers).
func TestPoolStatusShowsItsConsoleEndpoint(t *testing.T) {
	ctx := context.Background()
	p := startPool(t, &testPool{t: t, name: "console-endpoint", consoleAddress: "127.0.0.1:0"}, nil)
	mp := &computev1alpha1.MachinePool{}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: p.name}, mp)
		return err == nil && mp.Status.Console != nil, client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatalf("pool %s's status never showed its console endpoint: %v (%+v)", p.name, err, mp.Status)
	}
	ep := mp.Status.Console
	if !strings.HasPrefix(ep.Address, "127.0.0.1:") || ep.Address == "127.0.0.1:0" {
		t.Errorf("console endpoint %q, want the loopback port it listens on", ep.Address)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ep.CABundle) {
		t.Fatalf("the console endpoint's CA bundle holds no certificate: %q", ep.CABundle)
	}
	conn, err := tls.Dial("tcp", ep.Address, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatalf("a TLS client trusting the published CA: %v", err)
	}
	conn.Close()
}

// A console endpoint on a wildcard address is refused: its certificate names the address
// clients dial.
func TestConsoleEndpointOnAWildcardIsRefused(t *testing.T) {
	conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	o := poollet.DefaultOptions("console-wildcard")
	o.Runtime, o.ConsoleAddress = mriv1alpha1.NewMachineRuntimeClient(conn), "0.0.0.0:0"
	if _, err := poollet.New(env.Config, o); err == nil || !strings.Contains(err.Error(), "not a wildcard") {
		t.Fatalf("a console endpoint on 0.0.0.0: %v, want a refusal saying to name the address", err)
	}
}
