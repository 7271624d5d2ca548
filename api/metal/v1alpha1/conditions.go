package v1alpha1

import (
	"strconv"
	"strings"
)

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

// AnnotationSSHAddress on a Host is where its users reach the server's SSH (port 22), as
// HOST:PORT, when that is not the server's own address: a jump host's forward, or an
// emulated server's loopback forward (anvil dev sets it). The metal runtime reports it as
// the SSH address of the Machine the Host runs, beside its hostname. Only whoever may edit
// Hosts (the site's admin) sets it; a tenant sees it in its Machine's status.
const AnnotationSSHAddress = "metal.anvil.dev/ssh-address"

// AnnotationReboot on a provisioned Host asks for one reset of the server per distinct
// value (a token); status.rebootToken records the last one carried out. The metal runtime
// sets it for a Machine's reboot; an operator may too.
const AnnotationReboot = "metal.anvil.dev/reboot"

// AnnotationRebuild on a provisioned Host asks, on behalf of its consumer, that the server
// be redeployed in place: written again with spec.image and spec.configDrive by the
// provisioner's rebuild, its other disks kept, never wiped in between (the same tenant
// keeps its server). Its value is a token, RebuildToken(consumer uid, n): while it names
// the Host's consumer, a change of spec.image is rebuilt, and each new token rebuilds once
// even with the same image (a new config drive); status.rebuildToken records the last one
// carried out. Without it (or naming another consumer) a new image is written only after
// the server was deprovisioned, and wiped where the site wipes. The metal runtime sets it
// for a Machine's reimage and removes it when it claims or releases the Host.
const AnnotationRebuild = "metal.anvil.dev/rebuild"

// RebuildToken is the AnnotationRebuild value of the n-th rebuild asked for consumerUID.
func RebuildToken(consumerUID string, n int64) string {
	return consumerUID + "/" + strconv.FormatInt(n, 10)
}

// RebuildConsumer is the consumer uid a rebuild token was made for ("" for none).
func RebuildConsumer(token string) string {
	i := strings.LastIndex(token, "/")
	if i <= 0 {
		return ""
	}
	return token[:i]
}

// AnnotationDeployment on a Host is the Host controller's durable record of the server's
// deployment: which consumer (uid) a deployment of which image was started for, the rebuild
// and reboot tokens carried out on it, and, once its tear-down was asked, that it was
// released. Only the Host controller writes it: before the provisioner starts a deployment
// (so a lost provisioner database or a lost status never deploys a consumer's server
// twice: it is adopted), before it tears one down, and it removes it once the server is
// wiped (or, where the site does not wipe, deprovisioned). It is metadata so that it
// survives what status does not: a restore from a backup. Its value is JSON
// (internal/controller/host/hostplan Record).
const AnnotationDeployment = "metal.anvil.dev/deployment"
