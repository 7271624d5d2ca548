// Package brokeridentity makes the credentials a broker runtime holds for the anvil cluster
// below it (downstream): a ServiceAccount of the broker's downstream namespace bound to the
// shipped broker roles (config/rbac/broker, admission policy anvil-broker-scope), and a
// token for it. Tests and anvil dev use it to start a broker as an operator would.
package brokeridentity
