package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	poolletv1alpha1 "github.com/anvil-dev/anvil/api/poollet/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/apiauth"
	"github.com/anvil-dev/anvil/internal/controller/secretaccess"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet/consoleproxy"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// The attacks on a pool's console endpoint (docs/console.md): no token, a token the cluster
// does not know, a tenant's own ServiceAccount with the shipped tenant role, a user allowed
// another pool's proxy, and a user allowed this pool's proxy naming a machine by its
// runtime id or a Machine the pool does not run. What works: a caller allowed get on this
// pool's machinepools/proxy reads a Machine's console log and types at its console, one
// writer at a time. The gate runs as the pool's poollet, with its shipped role.
func TestPoolConsoleEndpointLetsInOnlyItsPoolsProxyUsers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "console")
	pool, other := "console-"+ns, "console-other-"+ns
	rt, runtime := fakeRuntime(t, pool)
	defer rt.Close()
	var ids []string
	for _, uid := range []string{"uid-a-" + ns, "uid-b-" + ns} {
		resp, err := runtime.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
			Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: uid}},
			Spec: &mriv1alpha1.MachineSpec{Architecture: mriv1alpha1.Architecture_ARCHITECTURE_AMD64, Power: mriv1alpha1.Power_POWER_ON,
				Image:     &mriv1alpha1.Image{Reference: "example.org/os:1", Digest: "sha256:" + strings.Repeat("ab", 32)},
				Resources: &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 1 << 30}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.GetMachine().GetMetadata().GetId())
	}

	if _, err := rbac.InstallPoollet(ctx, env.Client, pool); err != nil {
		t.Fatal(err)
	}
	poolletAPI, err := kubernetes.NewForConfig(tokenConfig(tokenOf(t, secretaccess.PoolletNamespace, secretaccess.ServiceAccountName(pool))))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := apiauth.New(ctx, poolletAPI, false)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := consoleproxy.Listen("127.0.0.1:0", &consoleproxy.Server{Runtime: runtime, Gate: &consoleproxy.Gate{Auth: auth, Pool: pool}})
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = ep.Start(serveCtx) }()

	proxyRole := func(name, pool string) {
		create(t, env.Client, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"compute.anvil.dev"}, Resources: []string{"machinepools/proxy"},
				ResourceNames: []string{pool}, Verbs: []string{"get"}}}})
		t.Cleanup(func() {
			_ = env.Client.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
	}
	bind := func(sa, role string) {
		create(t, env.Client, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + role, Namespace: ns},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}})
	}
	// machinepools are cluster-wide: a grant on them is a ClusterRoleBinding.
	bindCluster := func(sa, role string) {
		name := ns + "-" + sa
		create(t, env.Client, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}})
		t.Cleanup(func() {
			_ = env.Client.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
	}
	proxyRole(ns+"-proxy", pool)
	proxyRole(ns+"-other-proxy", other)
	bindCluster("console-server", ns+"-proxy")
	bindCluster("other-pool", ns+"-other-proxy")
	if err := env.InstallRBAC(ctx, "tenant"); err != nil {
		t.Fatal(err)
	}
	bind("tenant", "anvil-tenant")

	server := dialConsole(t, ep, tokenOf(t, ns, "console-server"))
	uidA := "uid-a-" + ns
	for _, tc := range []struct {
		who   string
		conn  poolletv1alpha1.PoolletConsoleClient
		id    string
		code  codes.Code
		extra string
	}{
		{"no token", dialConsole(t, ep, ""), uidA, codes.Unauthenticated, ""},
		{"a token the cluster does not know", dialConsole(t, ep, "not-a-token"), uidA, codes.Unauthenticated, ""},
		{"a tenant's ServiceAccount", dialConsole(t, ep, tokenOf(t, ns, "tenant")), uidA, codes.PermissionDenied, ""},
		{"a user of another pool's proxy", dialConsole(t, ep, tokenOf(t, ns, "other-pool")), uidA, codes.PermissionDenied, ""},
		{"a ServiceAccount with no grant", dialConsole(t, ep, tokenOf(t, ns, "nobody")), uidA, codes.PermissionDenied, ""},
		{"the pool's proxy user naming a runtime id", server, ids[0], codes.NotFound, ""},
		{"the pool's proxy user naming a Machine not on the pool", server, "uid-elsewhere", codes.NotFound, ""},
	} {
		_, err := readLog(ctx, tc.conn, tc.id)
		if status.Code(err) != tc.code {
			t.Errorf("%s reading %s's log: %v, want %s", tc.who, tc.id, err, tc.code)
		}
		if err != nil && strings.Contains(err.Error(), "not-a-token") {
			t.Errorf("%s: the error repeats the token: %v", tc.who, err)
		}
		if _, err := attach(ctx, tc.conn, tc.id, true); status.Code(err) != tc.code {
			t.Errorf("%s attaching to %s: %v, want %s", tc.who, tc.id, err, tc.code)
		}
	}

	// What works: the log of the Machine named, and only its.
	log, err := readLog(ctx, server, uidA)
	if err != nil || !strings.Contains(log, "fake machine "+ids[0]+": running") || strings.Contains(log, ids[1]) {
		t.Fatalf("the pool's proxy user reading Machine %s's log: %q, %v", uidA, log, err)
	}
	writer, err := attach(ctx, server, uidA, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attach(ctx, server, uidA, true); mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_CONSOLE_BUSY {
		t.Errorf("a second writer through the endpoint: %v, want CONSOLE_BUSY", err)
	}
	if err := writer.Send(&mriv1alpha1.ConsoleInput{Data: []byte("typed-through-the-pool\r")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log, "typed-through-the-pool") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		log, _ = readLog(ctx, server, uidA)
	}
	if !strings.Contains(log, "typed-through-the-pool") {
		t.Fatalf("what the writer typed never reached the console: %q", log)
	}

	// A client that does not trust the endpoint's CA does not get a connection.
	conn, err := grpc.NewClient(ep.Status.Address, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := readLog(ctx, poolletv1alpha1.NewPoolletConsoleClient(conn), uidA); status.Code(err) != codes.Unavailable {
		t.Errorf("a client without the endpoint's CA: %v, want a failed TLS handshake (UNAVAILABLE)", err)
	}
}

// fakeRuntime serves a fake runtime of pool on a unix socket and returns its client.
func fakeRuntime(t *testing.T, pool string) (*fake.Runtime, mriv1alpha1.MachineRuntimeClient) {
	t.Helper()
	rt, err := fake.New(fake.Config{Name: pool, Architectures: []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64},
		Allocatable: &mriv1alpha1.Resources{MilliCpu: 8000, MemoryBytes: 16 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "cs") // short: a unix socket's path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	endpoint := "unix://" + filepath.Join(dir, "mri.sock")
	l, err := mri.Listen(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = mri.ServeListener(ctx, l, rt, mri.Pool(pool)) }()
	c, conn, err := mri.Dial(endpoint, mri.Pool(pool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rt, c
}

// dialConsole is a client of the endpoint that trusts its CA and sends token (none when
// empty) with every call.
func dialConsole(t *testing.T, ep *consoleproxy.Endpoint, token string) poolletv1alpha1.PoolletConsoleClient {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ep.Status.CABundle)
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}))}
	if token != "" {
		opts = append(opts, grpc.WithStreamInterceptor(
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), desc, cc, method, o...)
			}))
	}
	conn, err := grpc.NewClient(ep.Status.Address, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return poolletv1alpha1.NewPoolletConsoleClient(conn)
}

// readLog reads a Machine's whole console log through the endpoint.
func readLog(ctx context.Context, c poolletv1alpha1.PoolletConsoleClient, uid string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := c.ReadConsoleLog(ctx, &mriv1alpha1.ReadConsoleLogRequest{Id: uid})
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for {
		msg, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out.String(), nil
		}
		if err != nil {
			return out.String(), err
		}
		out.Write(msg.GetData())
	}
}

// attach opens a Machine's console through the endpoint and waits for the word that it is
// open (or the refusal).
func attach(ctx context.Context, c poolletv1alpha1.PoolletConsoleClient, uid string, write bool) (grpc.BidiStreamingClient[mriv1alpha1.ConsoleInput, mriv1alpha1.ConsoleOutput], error) {
	st, err := c.AttachConsole(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(&mriv1alpha1.ConsoleInput{Open: &mriv1alpha1.ConsoleOpen{Id: uid, Write: write}}); err != nil {
		return nil, err
	}
	if _, err := st.Recv(); err != nil {
		return nil, err
	}
	return st, nil
}
