package provisioner

import (
	"regexp"
	"strings"
)

// redacted replaces what Redact cuts out.
const redacted = "******"

var (
	// userinfo is the user (and password) of a URL: redfish://admin:secret@10.0.0.5/...
	userinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@`)
	// passwordValue is the value of anything named like a password: password=x,
	// 'redfish_password': 'x', "ipmi_password": "x".
	passwordValue = regexp.MustCompile(`(?i)((?:password|passwd|pwd)[\w-]*['"]?\s*[:=]\s*['"]?)[^'"\s,;&}]+`)
)

// Redact cuts out of a provisioner's message what would give a BMC away to whoever reads a
// Host's status or Events: each of secrets (the Host's BMC password) where it is long
// enough to be told from ordinary text, the user information of any URL (a BMC address
// written redfish://user:password@host), and the value of anything named a password.
func Redact(msg string, secrets ...string) string {
	for _, s := range secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	msg = userinfo.ReplaceAllString(msg, "${1}"+redacted+"@")
	return passwordValue.ReplaceAllString(msg, "${1}"+redacted)
}
