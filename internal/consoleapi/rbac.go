package consoleapi

// What the console server (in the manager's binary) may do, generated into the manager's
// role (config/rbac/role.yaml): read kube-apiserver's front-proxy settings, review its
// callers, find a Machine's pool, and reach the pool's consoles.
//
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,resourceNames=extension-apiserver-authentication,verbs=get
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines;machinepools,verbs=get
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machinepools/proxy,verbs=get
