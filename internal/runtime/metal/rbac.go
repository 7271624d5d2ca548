package metal

// What the metal runtime reads and writes, generated with the Host controller's into
// config/rbac/metal/role.yaml (ClusterRole anvil-metal, and Role anvil-metal).
// Secrets (config drives, BMC and Ironic credentials), Hosts and HostPolicies are the
// site's infrastructure namespace's only, so that is where the Role grants them:
// anvil-metal, the namespace anvil dev uses; a site with another --namespace has the Role
// there (rbac.InstallMetal). HardwareData is written in tenant namespaces, as the
// read-only copy of a tenant's server; Machines are only read.
//
// +kubebuilder:rbac:groups=metal.anvil.dev,namespace=anvil-metal,resources=hosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.anvil.dev,namespace=anvil-metal,resources=hostpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.anvil.dev,resources=hardwaredata,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=anvil-metal,resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machineclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines,verbs=get
