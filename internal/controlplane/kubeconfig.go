package controlplane

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes an admin kubeconfig (mode 0600: it holds the admin token) whose
// single context, "anvil-dev", points at the local apiserver.
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["anvil-dev"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos["anvil-admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["anvil-dev"] = &clientcmdapi.Context{Cluster: "anvil-dev", AuthInfo: "anvil-admin"}
	kc.CurrentContext = "anvil-dev"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return writeFile(path, raw)
}
