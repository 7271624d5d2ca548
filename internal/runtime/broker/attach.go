package broker

// A downstream Machine's volumes and NICs cannot change once it is bound (its CRD says
// so), so a brokered machine has no hot-plug (CONTRACT.md E6): attaching what the machine
// already has, or detaching what it never had, succeeds and changes nothing (E3);
// anything else is INVALID with these messages (the Runtime's mutate.Fixed).
const (
	noVolumeHotplug = "the downstream Machine's volumes cannot change once it is bound: delete and recreate the machine with the volumes it needs"
	noNICHotplug    = "the downstream Machine's network interfaces cannot change once it is bound: delete and recreate the machine with the network interfaces it needs"
)
