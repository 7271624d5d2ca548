package consoleapi

// What the console server (in the manager's binary) may do, generated into the manager's
// role (config/rbac/role.yaml): read kube-apiserver's front-proxy settings, review its
// callers, find a Machine's pool, and reach the pool's consoles; in a cluster also write
// its CA into its APIService (CABundlePublisher; the Secret it shares with the other
// replicas is within the manager's rights on Secrets).
//
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,resourceNames=v1alpha1.subresources.compute.anvil.dev,verbs=get;patch
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,resourceNames=extension-apiserver-authentication,verbs=get
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines;machinepools,verbs=get
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machinepools/proxy,verbs=get
