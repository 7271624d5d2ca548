// Package attachment is the controller that tells a Machine's owner whether its volumes
// and network interfaces are ready: it writes the VolumesReady and NetworkInterfacesReady
// conditions from who holds each referenced object (decided by the claim controllers)
// and from the attach states the Machine's pool reports in status.
//
// It is the only writer of those two conditions; it never writes attach states or claims.
package attachment
