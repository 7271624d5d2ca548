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
