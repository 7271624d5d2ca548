package v1alpha1

// Condition types of an OSImage and an OSImageBuild. Every condition carries a Reason.
const (
	// ConditionReady: the output tag names the index of the current inputs.
	ConditionReady = "Ready"
	// ConditionBuilding: a build of the current inputs is under way.
	ConditionBuilding = "Building"
	// ConditionDegraded: the published index carries an architecture forward from an
	// earlier build because its build of the current inputs failed (CarryForward).
	ConditionDegraded = "Degraded"
	// ConditionRollingOut, on an OSImage: True while Machines booting the output tag are
	// being moved to the published index; False when all run it (Complete), when
	// spec.rollout.paused holds it (Paused), or when a Machine did not come back (Stalled,
	// naming it). Absent before the first publication.
	ConditionRollingOut = "RollingOut"
)

// Reasons of the RollingOut condition.
const (
	ReasonRollingOut      = "RollingOut"
	ReasonRolloutComplete = "Complete"
	ReasonRolloutPaused   = "Paused"
	ReasonRolloutStalled  = "Stalled"
)

// Reasons of the Events on an OSImage about its rollout.
const (
	EventRolloutStarted  = "RolloutStarted"
	EventRolloutStalled  = "RolloutStalled"
	EventRolloutComplete = "RolloutComplete"
)

// Annotations on a Machine by which the OSImage controller asks its pool to reimage it to
// a published index (the only writer; a poollet reads them). AnnotationRolloutTarget is the
// pinned reference TAG@DIGEST: the Machine's tag (spelled in full, as a registry client
// does) and the index digest to boot. The poollet acts on it only while spec.image still
// names that tag, so a Machine moved to another image is never sent back.
// AnnotationRolloutAskedAt is when it was asked (RFC 3339), for the progress deadline.
const (
	AnnotationRolloutTarget  = "images.anvil.dev/rollout-target"
	AnnotationRolloutAskedAt = "images.anvil.dev/rollout-asked-at"
)

// Reasons of the OSImage's and OSImageBuild's conditions.
const (
	ReasonPublished          = "Published"
	ReasonBuilding           = "Building"
	ReasonNotBuilding        = "NotBuilding"
	ReasonBuildFailed        = "BuildFailed"
	ReasonCarriedForward     = "CarriedForward"
	ReasonAllCurrent         = "AllArchitecturesCurrent"
	ReasonInvalidRecipe      = "InvalidContainerfile"
	ReasonContextMissing     = "ContextMissing"
	ReasonBaseUnavailable    = "BaseUnavailable"
	ReasonBaseNotOSImage     = "BaseNotOSImage"
	ReasonBaseLacksArch      = "BaseLacksArchitecture"
	ReasonBuilderUnavailable = "BuilderImageUnavailable"
	ReasonNoBuilderPool      = "NoBuilderPool"
	ReasonNoArchitectures    = "NoArchitectures"
	ReasonRegistryError      = "RegistryError"
	ReasonOutputNotOwned     = "OutputNotInNamespace"
	ReasonSecretMissing      = "SecretMissing"
	ReasonSuperseded         = "Superseded"

	// ReasonBaseNotOwned: the base is on the builders' registry outside the OSImage's
	// namespace's folder and the shared folders (another tenant's image, say).
	ReasonBaseNotOwned = "BaseNotOwned"
	// ReasonBaseNotBootable: an architecture's entry of the base has no kernel.
	ReasonBaseNotBootable = "BaseNotBootable"
	// ReasonNoPackageProxy: a RUN step runs apt and the builders' network offers no
	// package proxy.
	ReasonNoPackageProxy = "NoPackageProxy"
)

// Labels on builder Machines, by which a restarted controller finds them again.
const (
	LabelOSImage      = "images.anvil.dev/osimage"
	LabelBuild        = "images.anvil.dev/build"
	LabelArchitecture = "images.anvil.dev/architecture"
	LabelAttempt      = "images.anvil.dev/attempt"
)

// AnnotationSuperseded marks an unfinished OSImageBuild whose OSImage has moved on to other
// inputs: it stops its builders. The OSImage controller sets and clears it.
const AnnotationSuperseded = "images.anvil.dev/superseded"
