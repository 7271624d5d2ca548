package v1alpha1

// Condition types of a Host. Every condition carries a Reason.
const (
	// ConditionRegistered: the provisioner knows the Host and can reach its BMC.
	ConditionRegistered = "Registered"
	// ConditionInspected: the Host's hardware was inspected; HardwareData holds it.
	ConditionInspected = "Inspected"
	// ConditionProvisioned: the Host runs the image of spec.image.
	ConditionProvisioned = "Provisioned"
	// ConditionWiped: False while the server's disks may hold what a Machine left there
	// (it was provisioned with a tenant's image and has not been erased since); True once
	// the site's eraser has run to its end. A Host whose Wiped is False is never Available.
	// Absent on a Host no Machine has used, and on sites that do not wipe.
	ConditionWiped = "Wiped"
	// ConditionReady is the summary: the Host is in the state its spec asks, without error.
	ConditionReady = "Ready"
)

// Reasons of a Host's conditions.
const (
	ReasonRegistered             = "Registered"
	ReasonRegistering            = "Registering"
	ReasonCredentialsMissing     = "CredentialsSecretMissing"
	ReasonCredentialsInvalid     = "CredentialsInvalid"
	ReasonBMCUnreachable         = "BMCUnreachable"
	ReasonRegistrationFailed     = "RegistrationFailed"
	ReasonInspecting             = "Inspecting"
	ReasonInspected              = "Inspected"
	ReasonInspectionFailed       = "InspectionFailed"
	ReasonNotProvisioned         = "NotProvisioned"
	ReasonProvisioning           = "Provisioning"
	ReasonProvisioned            = "Provisioned"
	ReasonAdopted                = "Adopted"
	ReasonProvisioningFailed     = "ProvisioningFailed"
	ReasonImageUnavailable       = "ImageUnavailable"
	ReasonImageChecksumMismatch  = "ImageChecksumMismatch"
	ReasonConfigDriveMissing     = "ConfigDriveSecretMissing"
	ReasonDeprovisioning         = "Deprovisioning"
	ReasonDeprovisioningFailed   = "DeprovisioningFailed"
	ReasonDetached               = "Detached"
	ReasonDeleting               = "Deleting"
	ReasonProvisionerUnavailable = "ProvisionerUnavailable"
	ReasonReady                  = "Ready"
	ReasonPowerChangeFailed      = "PowerChangeFailed"
	// ReasonTenantData: the Wiped condition of a Host provisioned with a tenant's image.
	ReasonTenantData = "TenantData"
	// ReasonWiping: the eraser runs on the server (also the Ready reason meanwhile).
	ReasonWiping = "Wiping"
	// ReasonWiped: the eraser ran to its end and powered the server off.
	ReasonWiped = "Wiped"
	// ReasonWipeFailed: the eraser failed to deploy or did not power the server off in
	// time; the Host is not handed out, and the wipe is tried again with back-off.
	ReasonWipeFailed = "WipeFailed"
)

// FinalizerHost holds a Host's deletion until the provisioner has deprovisioned (unless
// detached) and forgotten it.
const FinalizerHost = "metal.anvil.dev/host"

// LabelMachine marks a tenant's projected HardwareData with the name of the Machine it
// describes. The copy carries no reference back to the Host or its namespace.
const LabelMachine = "metal.anvil.dev/machine"

// AnnotationReboot on a provisioned Host asks for one reset of the server per distinct
// value (a token); status.rebootToken records the last one carried out. The metal runtime
// sets it for a Machine's reboot; an operator may too.
const AnnotationReboot = "metal.anvil.dev/reboot"
