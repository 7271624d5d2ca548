// Command vmboot measures how long anvil takes from a Machine's creation to its guest's
// marker line on the serial console, against the same QEMU command line started by hand
// on the same image, in one run with a warm image cache; and the cold pull of the test OS
// from the local registry.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./test/scale/vmboot -rounds 3
//
// The figures are printed as JSON, never asserted.
package main
