package v1alpha1

import (
	"net/url"
	"strings"
)

// RedfishSystemURL is the HTTP(S) URL of the System a Redfish BMC address names
// (redfish://, redfish-virtualmedia://, each with +http or +https; plain means https), and
// false for an address of another kind or without a host. The provisioner registers the
// server with it, and the metal runtime asks it for the serial console.
func RedfishSystemURL(address string) (*url.URL, bool) {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return nil, false
	}
	kind, transport, _ := strings.Cut(u.Scheme, "+")
	if kind != "redfish" && kind != "redfish-virtualmedia" {
		return nil, false
	}
	switch transport {
	case "", "https":
		transport = "https"
	case "http":
	default:
		return nil, false
	}
	return &url.URL{Scheme: transport, Host: u.Host, Path: u.Path}, true
}
