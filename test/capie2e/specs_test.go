package capie2e

import (
	. "github.com/onsi/ginkgo/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/test/e2e"
)

// Cluster API's specs, as its own suite calls them, with anvil's provider and template.
var _ = Describe("QuickStart", func() {
	e2e.QuickStartSpec(ctx, func() e2e.QuickStartSpecInput {
		return e2e.QuickStartSpecInput{
			E2EConfig:              suite.e2eConfig,
			ClusterctlConfigPath:   suite.clusterctlPath,
			BootstrapClusterProxy:  suite.bootstrap,
			ArtifactFolder:         suite.artifacts,
			InfrastructureProvider: ptr.To("anvil"),
		}
	})
})

var _ = Describe("MachineDeploymentScale", func() {
	e2e.MachineDeploymentScaleSpec(ctx, func() e2e.MachineDeploymentScaleSpecInput {
		return e2e.MachineDeploymentScaleSpecInput{
			E2EConfig:              suite.e2eConfig,
			ClusterctlConfigPath:   suite.clusterctlPath,
			BootstrapClusterProxy:  suite.bootstrap,
			ArtifactFolder:         suite.artifacts,
			InfrastructureProvider: ptr.To("anvil"),
		}
	})
})
