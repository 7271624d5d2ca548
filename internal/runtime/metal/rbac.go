package metal

// What the metal runtime reads and writes, generated with the Host controller's into
// config/rbac/metal/role.yaml (ClusterRole anvil-metal). Secrets are written only in the
// site's infrastructure namespace (config drives); HardwareData is written in tenant
// namespaces, as the read-only copy of a tenant's server.
//
// +kubebuilder:rbac:groups=metal.anvil.dev,resources=hosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.anvil.dev,resources=hostpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.anvil.dev,resources=hardwaredata,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machineclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines,verbs=get
