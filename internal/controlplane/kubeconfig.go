package controlplane

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes cfg (a RESTConfig of this control plane: the admin's, or the
// admin's impersonating another identity) as a kubeconfig of mode 0600 (it holds the admin
// token) whose single context, "anvil-dev", points at the local apiserver. Start writes the
// admin's; tests write others for processes started beside it as that identity. A client
// certificate in cfg (envtest's admin has one) is written too.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["anvil-dev"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos["anvil-admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken,
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups}
	kc.Contexts["anvil-dev"] = &clientcmdapi.Context{Cluster: "anvil-dev", AuthInfo: "anvil-admin"}
	kc.CurrentContext = "anvil-dev"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return writeFile(path, raw)
}
