package poollet

// What a poollet may do, generated into config/rbac/poollet/role.yaml. Secrets are not
// here: the controller manager grants each pool's poollet get on exactly the Secrets its
// Machines reference (internal/controller/secretaccess).
//
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machinepools,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machinepools/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machineclasses;networkinterfaces,verbs=get;list;watch
// Namespace labels, when a pool's tenants are chosen by a namespace selector (admit.go).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// Events on its Machines (Reimaging, Reimaged).
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Its console endpoint's callers: who they are, and whether they may use the pool's
// consoles (consoleproxy).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=anvil-pool-leases,resources=leases,verbs=get;list;watch;create;update
