// Package provisioner is the seam between anvil's Host controller and the tool that drives
// servers' BMCs and writes their disks. Ironic is the one implementation today
// (internal/provisioner/ironic); the Host controller only ever sees this interface, so
// another tool can replace Ironic later.
//
// Every method is idempotent: calling it again after a crash, a timeout or a lost answer
// does no harm and answers as if it had been called once. Methods that start long work
// (inspection, deployment, cleaning) return once the work is started; Get reports how far
// it is.
package provisioner

import (
	"context"
	"errors"
)

// Provisioner drives servers through registration, inspection, provisioning and back.
// Hosts are named by a stable name chosen by the caller (anvil uses namespace~name); the
// provisioner may know them by its own ID as well, which Node.ID reports.
type Provisioner interface {
	// Get reports the node registered under name, or ErrNotFound.
	Get(ctx context.Context, name string) (Node, error)
	// Register creates the node, or updates its BMC details, boot MAC and hints when they
	// differ. A new node is taken to Manageable (which checks the BMC can be reached
	// with the credentials); Get then tells whether that worked.
	Register(ctx context.Context, r Registration) (Node, error)
	// Inspect starts hardware inspection of a Manageable node.
	Inspect(ctx context.Context, name string) error
	// Hardware returns what inspection found.
	Hardware(ctx context.Context, name string) (Hardware, error)
	// Provide makes a Manageable node Available (cleaning it if the provisioner cleans).
	Provide(ctx context.Context, name string) error
	// Provision writes image to an Available node, with a config drive, and boots it.
	// d.Starting, when set, is called once the deployment is about to start.
	Provision(ctx context.Context, name string, d Deployment) error
	// Rebuild writes d's image again to an Active node (or one whose deployment failed)
	// with d's config drive and boots it, keeping the server's other disks: a new image for
	// the same tenant, never cleaned in between. A node deployed, or being deployed, with
	// d's image and token already is left alone, so a retried call never rebuilds twice.
	Rebuild(ctx context.Context, name string, d Deployment) error
	// Deprovision takes an Active (or failed) node back to Available, cleaning it.
	Deprovision(ctx context.Context, name string) error
	// Power switches the node on or off.
	Power(ctx context.Context, name string, on bool) error
	// Reboot resets a powered-on node. It is not idempotent by itself: callers record
	// which request they carried out (anvil keeps the reboot token in the Host's status).
	Reboot(ctx context.Context, name string) error
	// Adopt takes a Manageable node that is already running d's image into Active
	// without writing its disk or rebooting it: for servers whose records the
	// provisioner lost. d's config drive is not used; d's token is kept with the node, as
	// Provision and Rebuild keep it, so a Rebuild for it finds it made.
	Adopt(ctx context.Context, name string, d Deployment) error
	// Detach makes the provisioner forget the node without touching the server.
	Detach(ctx context.Context, name string) error
	// Delete forgets the node; the caller deprovisions first when the server must be
	// wiped.
	Delete(ctx context.Context, name string) error
}

// Registration is what the provisioner needs to manage one server.
type Registration struct {
	Name string
	// BMCAddress as in Host.spec.bmc.address (redfish://, ipmi://, fake://...).
	BMCAddress                     string
	Username, Password             string
	DisableCertificateVerification bool
	BootMACAddress                 string
	// Architecture is a GOARCH name (amd64, arm64...).
	Architecture    string
	RootDeviceHints map[string]any
	// New says the caller has never registered this server, so the provisioner may try
	// to create it before looking it up. Register stays correct when it is wrong.
	New bool
}

// State is where a node is, in the provisioner's own terms reduced to what anvil acts on.
type State string

const (
	StateUnknown State = ""
	// StateEnrolling: registered, BMC not yet verified (Ironic: enroll, verifying).
	StateEnrolling State = "Enrolling"
	// StateManageable: BMC verified; inspect, provide or adopt from here.
	StateManageable State = "Manageable"
	StateInspecting State = "Inspecting"
	// StateCleaning: wiping before Available (Ironic: cleaning, clean wait).
	StateCleaning  State = "Cleaning"
	StateAvailable State = "Available"
	// StateDeploying: writing the image (Ironic: deploying, wait call-back).
	StateDeploying State = "Deploying"
	StateActive    State = "Active"
	StateAdopting  State = "Adopting"
	// StateDeleting: tearing down an Active node (Ironic: deleting).
	StateDeleting State = "Deleting"
	// StateFailed: the last operation failed; Node.LastError says why, Node.FailedFrom
	// which operation.
	StateFailed State = "Failed"
)

// Operation names what failed in a StateFailed node.
type Operation string

const (
	OpNone      Operation = ""
	OpRegister  Operation = "Register"
	OpInspect   Operation = "Inspect"
	OpClean     Operation = "Clean"
	OpProvision Operation = "Provision"
	OpAdopt     Operation = "Adopt"
	OpDelete    Operation = "Deprovision"
)

// Node is the provisioner's view of one server.
type Node struct {
	Name string
	// ID is the provisioner's own id (Ironic's node UUID).
	ID    string
	State State
	// FailedFrom is the operation that failed, when State is StateFailed.
	FailedFrom Operation
	// Busy means an operation is in progress; the caller waits for Get to change.
	Busy bool
	// PowerOn is nil when the power state is unknown.
	PowerOn *bool
	// LastError is the provisioner's message for the last failure, empty when none.
	LastError string
	// Image the node was provisioned or adopted with, when Active.
	Image Image
	// Hash of the registration details last applied, so callers can tell whether
	// Register has anything to update without reading the credentials back.
	RegistrationHash string
}

// Image is what a node is provisioned with: a disk image written to its disk (URL,
// Checksum, Format), or a kernel and initramfs it boots from RAM (Kernel, Initramfs,
// KernelArguments).
type Image struct {
	URL string
	// Checksum is "sha256:<hex>".
	Checksum string
	// Format is raw or qcow2.
	Format string
	// Kernel and Initramfs, when set, are booted from RAM instead of a disk image.
	Kernel, Initramfs *File
	// KernelArguments is the kernel's command line.
	KernelArguments string
}

// File is one file a node boots.
type File struct {
	URL string
	// Checksum is "sha256:<hex>".
	Checksum string
}

// Ramdisk reports whether the image is a kernel and initramfs booted from RAM.
func (i Image) Ramdisk() bool { return i.Kernel != nil }

// BootMode is the firmware a node boots with.
type BootMode string

const (
	BootModeUEFI   BootMode = "uefi"
	BootModeLegacy BootMode = "bios"
)

// Deployment is what Provision writes.
type Deployment struct {
	Image Image
	// BootMode is how the node's firmware boots the deployment; empty leaves it to the
	// provisioner's default.
	BootMode BootMode
	// ConfigDrive is the first-boot data; nil writes none.
	ConfigDrive *ConfigDrive
	// Token names the request this deployment carries out (anvil: the Host's rebuild
	// token); kept with the node, so that Rebuild knows a deployment it already made.
	Token string
	// Starting, when set, is called by Provision and Rebuild once the deployment is about
	// to start: the node is in a state to take it and the provisioner holds what it needs
	// (a deploy slot), and nothing was asked of the server yet. It is not called by a call
	// that finds the deployment made or under way already, nor by one that must wait
	// (ErrBusy). An error from it abandons the call, which returns that error. anvil
	// records there, durably, that the server may from now on hold the deployment.
	Starting func(context.Context) error
}

// ConfigDrive is the content of an OpenStack config drive.
type ConfigDrive struct {
	UserData    []byte
	MetaData    map[string]any
	NetworkData map[string]any
}

// Hardware is what inspection found on a server.
type Hardware struct {
	Architecture string
	CPUCount     int
	CPUModel     string
	MemoryMiB    int64
	Disks        []Disk
	NICs         []NIC
}

// Disk is one block device found by inspection.
type Disk struct {
	Name, SerialNumber, WWN, Model string
	SizeBytes                      int64
	Rotational                     bool
}

// NIC is one network interface found by inspection.
type NIC struct {
	Name, MACAddress, IP string
	SpeedGbps            int
}

// Errors a Provisioner returns, wrapped, so callers can tell them apart with errors.Is.
var (
	// ErrNotFound: no node has that name.
	ErrNotFound = errors.New("node not found")
	// ErrBusy: the node is in the middle of an operation; try again when Get says it is
	// done. Not a failure.
	ErrBusy = errors.New("node busy")
	// ErrWrongState: the operation does not apply in the node's current state.
	ErrWrongState = errors.New("operation not allowed in the node's state")
	// ErrUnavailable: the provisioner cannot be reached or is overloaded; retry later.
	ErrUnavailable = errors.New("provisioner unavailable")
	// ErrInvalid: the request can never succeed as given (bad BMC address, bad image).
	ErrInvalid = errors.New("invalid request")
)
