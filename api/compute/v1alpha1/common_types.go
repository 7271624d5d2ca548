package v1alpha1

// Power is what the user wants a Machine's power to be.
// +kubebuilder:validation:Enum=On;Off
type Power string

const (
	PowerOn  Power = "On"
	PowerOff Power = "Off"
)

// ImageUpdatePolicy says what a bound Machine does when its spec.image changes.
// +kubebuilder:validation:Enum=Reimage;Never
type ImageUpdatePolicy string

const (
	// ImageUpdatePolicyUnset is the zero value; the API defaults it to Reimage.
	ImageUpdatePolicyUnset ImageUpdatePolicy = ""
	// ImageUpdatePolicyReimage: the machine is reimaged in place with the new image (its
	// root disk made anew, its other volumes kept, its id and pool kept).
	ImageUpdatePolicyReimage ImageUpdatePolicy = "Reimage"
	// ImageUpdatePolicyNever: the machine keeps the image it booted; ImageUpToDate says
	// it is behind.
	ImageUpdatePolicyNever ImageUpdatePolicy = "Never"
)

// Emulation says whether a Machine may run emulated.
// +kubebuilder:validation:Enum=Allowed;Forbidden
type Emulation string

const (
	// EmulationUnset is the zero value; the API defaults it to Allowed.
	EmulationUnset     Emulation = ""
	EmulationAllowed   Emulation = "Allowed"
	EmulationForbidden Emulation = "Forbidden"
)

// SecretKeySelector names one key of a Secret in the Machine's namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key in the Secret's data. The default depends on the field: see ignitionRef and userDataRef.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// LocalObjectReference names an object of a known kind in the same namespace (or, for a
// cluster-scoped kind, in the cluster).
type LocalObjectReference struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ClaimReference records which Machine holds a Volume or NetworkInterface.
type ClaimReference struct {
	// Name of the Machine, in the claimed object's namespace.
	Name string `json:"name"`
	// UID of the Machine, so a new Machine of the same name is not mistaken for the holder.
	UID string `json:"uid"`
}

// AttachState is how far a Volume or NetworkInterface is attached to its Machine.
// +kubebuilder:validation:Enum=Pending;Attached
type AttachState string

const (
	AttachStatePending  AttachState = "Pending"
	AttachStateAttached AttachState = "Attached"
)

// Condition types shared by anvil's kinds. Every condition carries a Reason.
const (
	// ConditionReady is the summary: the object is doing what its spec asks.
	ConditionReady = "Ready"
	// ConditionScheduled says whether a Machine has a pool.
	ConditionScheduled = "Scheduled"
	// ConditionClaimed says whether a Volume or NetworkInterface is held by a Machine.
	ConditionClaimed = "Claimed"
	// ConditionImageReady and the rest report one part of a Machine's set-up each.
	ConditionImageReady             = "ImageReady"
	ConditionIgnitionReady          = "IgnitionReady"
	ConditionVolumesReady           = "VolumesReady"
	ConditionNetworkInterfacesReady = "NetworkInterfacesReady"
	// ConditionImageUpToDate says whether the Machine still runs the image its spec names:
	// False when spec.image changed after boot, or when the OSImage whose output it names
	// has published a different entry for its architecture. Absent for other images.
	ConditionImageUpToDate = "ImageUpToDate"
	// ConditionReimaging says whether a reimage is under way: True (Reimaging) from the
	// poollet's ReimageMachine call until the runtime runs the new image, then False
	// (Reimaged), or False (ReimageRefused) when the runtime refused the new image. Absent
	// on a Machine never reimaged.
	ConditionReimaging = "Reimaging"
	// ConditionFirstBootUpToDate says whether the machine booted the first-boot config its
	// spec names now: False (AppliedAtNextReimage) after ignitionRef, userDataRef or the
	// Secret's data changed, since a running machine has read its first-boot config
	// already. Absent until the first-boot config differs from what was booted.
	ConditionFirstBootUpToDate = "FirstBootUpToDate"
	// ConditionOrphansHeld, on a MachinePool, says its poollet holds back deleting the
	// runtime machines that have no Machine of the pool, because there are more of them
	// than it may delete on its own (reason TooManyOrphans). Absent otherwise.
	ConditionOrphansHeld = "OrphansHeld"
	// ConditionSiteReachable, on a Machine of a broker's pool (whose machines are Machines
	// of another anvil cluster, a site), says whether the site's API answers: False
	// (ReasonSiteUnreachable) while the rest of the status is the last the broker saw. The
	// poollet shows it as the runtime reports it; absent on other pools' Machines.
	ConditionSiteReachable = "SiteReachable"
	// ConditionServerPowerFailing, on a Machine of a bare-metal pool, is True
	// (ReasonPowerChangeFailed) while its server's power cannot be switched as spec.power
	// asks: the site's attempts failed, and it tries again with back-off. The state then
	// says what the server's power is (Shutdown for a server reported Off) and Ready is
	// False. The poollet shows it as the runtime reports it; absent otherwise.
	ConditionServerPowerFailing = "ServerPowerFailing"
	// ConditionConsoleAvailable says whether the Machine's serial console can be used
	// through the API (machines/console, machines/consolelog; docs/console.md): True
	// (ReasonConsoleAvailable) while it runs on a pool that serves consoles, False with
	// why not otherwise — its log can still be read while it is not running
	// (ReasonConsoleMachineNotRunning).
	ConditionConsoleAvailable = "ConsoleAvailable"
	// ConditionGuestStopped, on a Machine of a QEMU pool, is True while QEMU holds its
	// guest stopped on an error it cannot go on from (QEMU's run state internal-error,
	// io-error or guest-panicked; the reason is that state): the process runs and answers,
	// the guest executes nothing. Ready is then False with the same reason. Seen with a
	// host whose KVM stops real kernels ("KVM internal error", docs/qemu-runtime.md). The
	// poollet shows it as the runtime reports it; absent otherwise.
	ConditionGuestStopped = "GuestStopped"
)

// Reasons of the ConsoleAvailable condition.
const (
	ReasonConsoleAvailable = "Available"
	// ReasonConsoleMachineNotRunning: the log can be read; typing needs the machine running.
	ReasonConsoleMachineNotRunning = "MachineNotRunning"
	// ReasonPoolServesNoConsoles: the pool's poollet has no console endpoint.
	ReasonPoolServesNoConsoles = "PoolServesNoConsoles"
	// ReasonRuntimeHasNoConsole: the pool's runtime offers no serial console for the
	// machine (bare-metal servers' are not served yet).
	ReasonRuntimeHasNoConsole = "RuntimeHasNoConsole"
)

// ReasonPowerChangeFailed is the reason of ServerPowerFailing, and of Ready while it is
// True.
const ReasonPowerChangeFailed = "PowerChangeFailed"

// Reasons of the SiteReachable condition.
const (
	ReasonSiteReachable = "SiteReachable"
	// ReasonSiteUnreachable: the site's API could not be read lately; nothing is deleted
	// for it.
	ReasonSiteUnreachable = "SiteUnreachable"
)

// Reasons of the ImageUpToDate condition.
const (
	// ReasonImageCurrent: the booted entry is the one published for the architecture.
	ReasonImageCurrent = "Current"
	// ReasonNewerImagePublished: the OSImage published another entry for the architecture.
	ReasonNewerImagePublished = "NewerImagePublished"
	// ReasonImageChanged: spec.image names another image than the machine booted: under
	// imageUpdatePolicy Never it keeps it; under Reimage, until the reimage ends.
	ReasonImageChanged = "ImageChanged"
	// ReasonImageUnknown: the booted image could not be read to compare it.
	ReasonImageUnknown = "ImageUnknown"
)

// Reasons of the Events on a Machine, besides Reimaging, Reimaged and ReimageRefused: the
// scheduler's Scheduled and Unschedulable, the poollet's for its runtime machine.
const (
	EventScheduled     = "Scheduled"
	EventUnschedulable = "Unschedulable"
	EventCreated       = "Created"
	EventStarted       = "Started"
	EventPoweredOff    = "PoweredOff"
	EventFailed        = "Failed"
	EventDeleted       = "Deleted"
)

// Reasons of the Reimaging and FirstBootUpToDate conditions.
const (
	ReasonReimaging      = "Reimaging"
	ReasonReimaged       = "Reimaged"
	ReasonReimageRefused = "ReimageRefused"
	// ReasonFirstBootCurrent: the machine booted the first-boot config the spec names.
	ReasonFirstBootCurrent = "Current"
	// ReasonAppliedAtNextReimage: the first-boot config changed after the machine booted;
	// the next reimage boots with it.
	ReasonAppliedAtNextReimage = "AppliedAtNextReimage"
)

// Reasons of the Scheduled condition.
const (
	// ReasonBound: the scheduler bound the Machine to a pool.
	ReasonBound = "Bound"
	// ReasonPinned: the user set machinePoolRef.
	ReasonPinned = "Pinned"
	// ReasonUnschedulable: no pool fits; the message says why, per reason.
	ReasonUnschedulable = "Unschedulable"
	// ReasonWaitingForPools: no pool fits yet, but there is no pool yet, or one that has
	// not reported yet (its poollet starting) may take the Machine. No Warning is recorded
	// for it: pools coming up are not news.
	ReasonWaitingForPools = "WaitingForPools"
	// ReasonClassNotFound: the MachineClass does not exist.
	ReasonClassNotFound = "MachineClassNotFound"
	// ReasonRuntimeRefused: the pool's runtime refused the Machine (no capacity, wrong
	// architecture). The poollet sets it with observedGeneration; the scheduler then
	// takes the Machine back and tries other pools.
	ReasonRuntimeRefused = "RuntimeRefused"
	// ReasonImageUnresolved: the image's registry could not say which architectures the
	// image offers (missing image, unreachable registry); retried.
	ReasonImageUnresolved = "ImageUnresolved"
	// ReasonImageRequirementsUnmet: the image lacks an annotation of the Machine's
	// requiredImageAnnotations (or carries another value); retried, as the tag may be
	// pushed again.
	ReasonImageRequirementsUnmet = "ImageRequirementsUnmet"
	// ReasonRegistryRefused: the image's registry is on a loopback, link-local or private
	// address the reader (the manager's scheduler, a poollet) does not allow-list
	// (--allow-registry). Not retried: only the reader's configuration changes it. Also a
	// reason of the ImageReady condition, set by the poollet.
	ReasonRegistryRefused = "RegistryRefused"
)

// AnnotationBoundBy marks a machinePoolRef set by the scheduler (value "scheduler"), as
// opposed to one pinned by the user: only the former is taken back after a refusal.
const AnnotationBoundBy = "compute.anvil.dev/bound-by"

// FinalizerRuntimeMachine holds a Machine's deletion until its pool's runtime reports the
// runtime machine gone. The scheduler adds it in the same write that binds the Machine;
// the poollet adds it for a Machine pinned by its user, and removes it.
const FinalizerRuntimeMachine = "compute.anvil.dev/runtime-machine"

// AnnotationReboot asks for one reboot per distinct value (a token): setting it to a new
// token reboots the machine once.
const AnnotationReboot = "compute.anvil.dev/reboot"

// Reasons of the Ready condition and of the poollet's other conditions.
const (
	ReasonRunning            = "Running"
	ReasonPending            = "Pending"
	ReasonShutdown           = "Shutdown"
	ReasonTerminating        = "Terminating"
	ReasonTerminated         = "Terminated"
	ReasonSecretNotFound     = "SecretNotFound"
	ReasonIgnitionInvalid    = "IgnitionInvalid"
	ReasonImageResolveFailed = "ImageResolveFailed"
	ReasonRuntimeError       = "RuntimeError"
	ReasonRuntimeReachable   = "RuntimeReachable"
	ReasonRuntimeUnreachable = "RuntimeUnreachable"
	// ReasonInvalidHostSelector: spec.hostSelector does not parse as a label selector.
	ReasonInvalidHostSelector = "InvalidHostSelector"
	// ReasonImageNotOwned: the image is on a registry the pool reads with its own
	// credential, outside the Machine's namespace's folder and the shared folders (another
	// tenant's image, say). It changes only with spec.image or the pool's shared folders.
	ReasonImageNotOwned = "ImageNotOwned"
	// ReasonWrongRuntime: the runtime at the poollet's endpoint serves another pool.
	ReasonWrongRuntime = "WrongRuntime"
	// ReasonTooManyOrphans: see ConditionOrphansHeld.
	ReasonTooManyOrphans    = "TooManyOrphans"
	ReasonDuplicateMachines = "DuplicateRuntimeMachines"
)
