// Package admission holds anvil's ValidatingAdmissionPolicies (the YAML beside this file)
// and installs them: rules the API server enforces for every client, which no controller
// could, because they depend on who is asking.
package admission
