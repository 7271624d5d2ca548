package capi

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig is a kubeconfig for https://127.0.0.1:6443 whose current context has namespace ns.
func kubeconfig(t *testing.T, ns string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["anvil"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
	cfg.AuthInfos["tenant"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["tenant"] = &clientcmdapi.Context{Cluster: "anvil", AuthInfo: "tenant", Namespace: ns}
	cfg.CurrentContext = "tenant"
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// An identityRef kubeconfig names its namespace in its current context, as a kubeconfig
// does. clientcmd's Namespace() does not call that explicit, and every such kubeconfig was
// refused as naming no namespace.
func TestRemoteConfigReadsTheContextsNamespace(t *testing.T) {
	cfg, ns, err := remoteConfig(kubeconfig(t, "tenant-a"))
	if err != nil {
		t.Fatalf("remoteConfig: %v", err)
	}
	if ns != "tenant-a" || cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "t" {
		t.Fatalf("remoteConfig: namespace %q, host %q, token %q", ns, cfg.Host, cfg.BearerToken)
	}
	for name, raw := range map[string][]byte{
		"no namespace":     kubeconfig(t, ""),
		"not a kubeconfig": []byte("{"),
	} {
		if _, _, err := remoteConfig(raw); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "no namespace" && !strings.Contains(err.Error(), "names no namespace") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
