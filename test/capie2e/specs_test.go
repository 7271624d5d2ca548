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

// The md-remediation flavor's MachineHealthCheck (config/clusterctl/flavors): the spec marks
// a worker's Node unhealthy and waits for Cluster API to replace its Machine.
var _ = Describe("MachineDeploymentRemediation", func() {
	e2e.MachineDeploymentRemediationSpec(ctx, func() e2e.MachineDeploymentRemediationSpecInput {
		return e2e.MachineDeploymentRemediationSpecInput{
			E2EConfig:              suite.e2eConfig,
			ClusterctlConfigPath:   suite.clusterctlPath,
			BootstrapClusterProxy:  suite.bootstrap,
			ArtifactFolder:         suite.artifacts,
			InfrastructureProvider: ptr.To("anvil"),
		}
	})
})
