// Package nodeimage publishes the Cluster API node image: the test OS with anvil-node-agent
// added, so a guest's first-boot script can make it a Node of a workload cluster (see
// test/nodeagent). It lives apart from nodeagent so the agent's static binary does not
// carry the image code.
package nodeimage

import (
	"context"

	"github.com/anvil-dev/anvil/internal/buildagent"
)

// AgentPath is where the node image holds the agent: first-boot scripts run it from there.
const AgentPath = "/bin/anvil-node-agent"

// Push publishes the node image to reference: for every architecture that has both, the
// test OS of osDir/ARCH (make testos) with agentsDir/ARCH/anvil-node-agent (make agents puts
// it in bin/node-agent) added to its initramfs. It returns the pinned reference.
func Push(ctx context.Context, reference, osDir, agentsDir string) (string, error) {
	return buildagent.PushWithAgent(ctx, reference, osDir, agentsDir, AgentPath)
}
