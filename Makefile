# anvil's build. Every tool it needs is pinned in hack/tools/* and built into bin/ only
# when missing (or when its pin changes), so repeated runs are cheap.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

BIN := $(CURDIR)/bin
HOSTARCH := $(shell go env GOARCH)
KUBE_VERSION := v1.36.3
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 \
	-X k8s.io/component-base/version.gitTreeState=clean
# The Cluster API core manager, its kubeadm bootstrap and control-plane providers and clusterctl,
# one release, which the Cluster API provider's tests and `anvil dev --capi` run (docs/capi.md).
CAPI_VERSION := v1.14.2
CAPI_LDFLAGS := -X sigs.k8s.io/cluster-api/version.gitVersion=$(CAPI_VERSION) \
	-X sigs.k8s.io/cluster-api/version.gitMajor=1 -X sigs.k8s.io/cluster-api/version.gitMinor=14 \
	-X sigs.k8s.io/cluster-api/version.gitTreeState=clean
# Integration and end-to-end tests read the control-plane binaries from here (envtest's variable).
export KUBEBUILDER_ASSETS := $(BIN)
# Flags of every go test hack/test.sh runs: it runs the packages that boot QEMU guests one
# at a time, and the rest one at a time beside them (see the script). Tests' artifacts
# (t.ArtifactDir: test/ui's screenshots) are kept under test-artifacts/.
GO_TEST_FLAGS ?= -timeout 40m -artifacts -outputdir=$(CURDIR)/test-artifacts

# The build agent, one static binary per architecture builders run (see docs/imagebuild.md).
AGENT_ARCHS := amd64 arm64
AGENTS := $(AGENT_ARCHS:%=$(BIN)/build-agent/%/anvil-build-agent)
AGENT_SOURCES := $(shell find cmd/anvil-build-agent internal/buildagent internal/imagebuild internal/osimage api/compute -name '*.go' -not -name '*_test.go') go.mod go.sum
# The node agent the Cluster API tests' node image runs in its guests to register their Nodes
# (docs/capi.md): a test program, never in a product image.
NODE_AGENTS := $(AGENT_ARCHS:%=$(BIN)/node-agent/%/anvil-node-agent)
NODE_AGENT_SOURCES := $(shell find test/nodeagent/cmd/anvil-node-agent test/nodeagent -maxdepth 1 -name '*.go' -not -name '*_test.go') go.mod go.sum

CONTROL_PLANE := $(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/kubectl
GENERATORS := $(BIN)/controller-gen $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
# Cluster API's providers by clusterctl's names, each with its CRDs and webhook configurations
# in bin/capi/<name>/ (test/capienv reads them there).
CAPI_PROVIDERS := cluster-api bootstrap-kubeadm control-plane-kubeadm
CAPI_MANIFESTS := $(BIN)/capi/VERSION $(CAPI_PROVIDERS:%=$(BIN)/capi/%/webhook/manifests.yaml)
CAPI := $(BIN)/capi-manager $(BIN)/capi-kubeadm-bootstrap $(BIN)/capi-kubeadm-control-plane $(BIN)/clusterctl $(CAPI_MANIFESTS)
# The node test/cluster runs beside the control plane (docs/cluster.md).
NODE := $(BIN)/kubelet $(BIN)/kube-proxy
TOOLS := $(CONTROL_PLANE) $(BIN)/kube-scheduler $(BIN)/kube-controller-manager $(NODE) $(GENERATORS) $(CAPI)

.PHONY: build tools clusterctl-repo testos eraser debian kube node-image esp agents kube-images images manifests generate verify-generated vet test test-setup test-only test-debian-builds test-kubeadm test-capi-e2e fuzz chaos demo bench deps fresh-check clean

build: ## The anvil binary.
	go build -o $(BIN)/anvil ./cmd/anvil

tools: $(TOOLS) ## Control-plane binaries (kube-controller-manager too), kubelet and kube-proxy, code generators, the Cluster API manager and kubeadm providers, their manifests (bin/capi) and clusterctl.

# kube-controller-manager runs beside the workload clusters' apiservers of the Cluster API tests
# (CSR signing and approval, bootstrap tokens, node lifecycle); kubelet and kube-proxy make the
# real node of test/cluster.
# Each group is one go build, so the packages its binaries share are compiled once: the
# demo's two first, the test-only four when make test asks for them.
# They are built as make kube builds its static binaries (KUBE_STATIC_BUILD, below), so
# the packages both compile are compiled once, for this machine's architecture.
$(BIN)/kube-apiserver $(BIN)/kubectl &: hack/tools/kube/go.mod
	cd hack/tools/kube && $(KUBE_STATIC_BUILD) -o $(BIN)/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl

$(BIN)/kube-scheduler $(BIN)/kube-controller-manager $(NODE) &: hack/tools/kube/go.mod
	cd hack/tools/kube && $(KUBE_STATIC_BUILD) -o $(BIN)/ \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy

# The etcd image's binary for this machine's architecture: one build of it.
$(BIN)/etcd: $(BIN)/kube/$(HOSTARCH)/etcd
	ln -f $< $@

# Since v1.14 the core manager's main package is sigs.k8s.io/cluster-api/core (about 6.5
# minutes on 2 cores the first time).
$(BIN)/capi-manager: hack/tools/capi/go.mod
	cd hack/tools/capi && go build -o $@ -ldflags "$(CAPI_LDFLAGS)" sigs.k8s.io/cluster-api/core

# The kubeadm bootstrap provider (CABPK) and KubeadmControlPlane, whose mains are in the same
# module; each shares most packages with the core manager, so after it they take about a minute.
$(BIN)/capi-kubeadm-bootstrap: hack/tools/capi/go.mod
	cd hack/tools/capi && go build -o $@ -ldflags "$(CAPI_LDFLAGS)" sigs.k8s.io/cluster-api/bootstrap/kubeadm

$(BIN)/capi-kubeadm-control-plane: hack/tools/capi/go.mod
	cd hack/tools/capi && go build -o $@ -ldflags "$(CAPI_LDFLAGS)" sigs.k8s.io/cluster-api/controlplane/kubeadm

$(BIN)/clusterctl: hack/tools/capi/go.mod
	cd hack/tools/capi && go build -o $@ -ldflags "$(CAPI_LDFLAGS)" sigs.k8s.io/cluster-api/cmd/clusterctl

# Each provider's CRDs and webhook configurations (bin/capi/<provider>/{crd,webhook}) and
# clusterctl's inventory CRD, copied out of the pinned module so that tests (test/capienv)
# never read the module cache's layout. A provider's folder in the module is
# core/, bootstrap/kubeadm/ or controlplane/kubeadm/.
$(CAPI_MANIFESTS) &: hack/tools/capi/go.mod
	cd hack/tools/capi && go mod download sigs.k8s.io/cluster-api
	read -r src version < <(cd hack/tools/capi && go list -m -f '{{.Dir}} {{.Version}}' sigs.k8s.io/cluster-api); \
	rm -rf $(BIN)/capi; \
	for p in cluster-api:core bootstrap-kubeadm:bootstrap/kubeadm control-plane-kubeadm:controlplane/kubeadm; do \
		mkdir -p $(BIN)/capi/$${p%%:*}/crd $(BIN)/capi/$${p%%:*}/webhook; \
		cp $$src/$${p#*:}/config/crd/bases/*.yaml $(BIN)/capi/$${p%%:*}/crd/; \
		cp $$src/$${p#*:}/config/webhook/manifests.yaml $(BIN)/capi/$${p%%:*}/webhook/; \
	done; \
	cp $$src/cmd/clusterctl/config/manifest/clusterctl-api.yaml $(BIN)/capi/; \
	chmod -R u+w $(BIN)/capi; \
	echo $$version >$(BIN)/capi/VERSION

# clusterctl's local repository of anvil's provider (docs/capi.md, "Quick start"):
# infrastructure-anvil/v0.1.0/ holds the components (config/capi, as kubectl apply -k renders
# them), the metadata and the default cluster template (config/clusterctl); clusterctl.yaml
# names it for clusterctl's --config. The version is the one clusterapi.AnvilProviderVersion
# records in the inventory.
CLUSTERCTL_REPO := $(BIN)/clusterctl-repo
clusterctl-repo: $(BIN)/kubectl ## clusterctl's local repository of anvil's provider and its config, in bin/clusterctl-repo.
	rm -rf $(CLUSTERCTL_REPO)
	mkdir -p $(CLUSTERCTL_REPO)/infrastructure-anvil/v0.1.0
	$(BIN)/kubectl kustomize config/capi >$(CLUSTERCTL_REPO)/infrastructure-anvil/v0.1.0/infrastructure-components.yaml
	cp config/clusterctl/metadata.yaml config/clusterctl/cluster-template.yaml $(CLUSTERCTL_REPO)/infrastructure-anvil/v0.1.0/
	for f in config/clusterctl/flavors/*.yaml; do \
		(cat config/clusterctl/cluster-template.yaml; echo ---; cat $$f) >$(CLUSTERCTL_REPO)/infrastructure-anvil/v0.1.0/cluster-template-$$(basename $$f); \
	done
	printf 'providers:\n- name: anvil\n  type: InfrastructureProvider\n  url: file://%s\n' \
		$(CLUSTERCTL_REPO)/infrastructure-anvil/v0.1.0/infrastructure-components.yaml >$(CLUSTERCTL_REPO)/clusterctl.yaml

$(BIN)/controller-gen: hack/tools/gen/go.mod
	cd hack/tools/gen && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(BIN)/protoc-gen-go: hack/tools/gen/go.mod
	cd hack/tools/gen && go build -o $@ google.golang.org/protobuf/cmd/protoc-gen-go

$(BIN)/protoc-gen-go-grpc: hack/tools/gen/go.mod
	cd hack/tools/gen && go build -o $@ google.golang.org/grpc/cmd/protoc-gen-go-grpc

testos: $(BIN)/testos/VERSIONS ## The test OS (kernel, initramfs, cmdline) for amd64 and arm64 in bin/testos.

# Rebuilt only when hack/testos changes; the Debian packages it needs are cached outside bin/.
$(BIN)/testos/VERSIONS: $(shell find hack/testos -type f)
	hack/testos/build.sh $(BIN)/testos

eraser: $(BIN)/eraser/VERSIONS ## The disk eraser the metal site boots on a released server (kernel, initramfs, cmdline) for amd64 and arm64 in bin/eraser.

# The test OS's kernel and busybox with another /init: rebuilt when either folder changes.
$(BIN)/eraser/VERSIONS: $(shell find hack/eraser hack/testos -type f)
	hack/eraser/build.sh $(BIN)/eraser

debian: $(BIN)/debian/VERSIONS ## Debian 12 with its own cloud-init (kernel, initramfs, root disk, cmdline) for amd64 and arm64 in bin/debian: docs/debian.md.

# Its packages are cached beside the test OS's; its second stage runs in TCG guests (minutes).
# bin/ is made and the result touched here, not in the script: a kept build is copied into
# bin/ at once, and the script's own files are the kept build's key (an edit there would
# rebuild the image, about 40 minutes).
$(BIN)/debian/VERSIONS: $(shell find hack/debian hack/testos -type f)
	mkdir -p $(BIN)
	hack/debian/build.sh $(BIN)/debian
	touch $@ # a kept build's copy keeps its old times: newer than its inputs, or make copies it again

# Kubernetes for kubeadm clusters on anvil Machines (docs/kubeadm.md): the binaries of the node
# image and of the control-plane images, static (a guest's or an image's libc never has to
# match), for each architecture, from the same pin as the tools above. One go build an
# architecture, so their shared packages compile once (about 20 minutes the first time here).
KUBE_STATIC_BUILD = CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(KUBE_LDFLAGS)"
KUBE_STATIC := kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl
kube: $(foreach a,$(AGENT_ARCHS),$(foreach b,$(KUBE_STATIC),$(BIN)/kube/$(a)/$(b))) ## Static Kubernetes binaries (control plane, kubelet, kubeadm, kubectl) for amd64 and arm64 in bin/kube/ARCH.

$(foreach b,$(KUBE_STATIC),$(BIN)/kube/%/$(b)): hack/tools/kube/go.mod
	cd hack/tools/kube && GOARCH=$* $(KUBE_STATIC_BUILD) -o $(BIN)/kube/$*/ $(KUBE_STATIC:%=k8s.io/kubernetes/cmd/%)

node-image: $(BIN)/node-image/VERSIONS ## The Kubernetes node image (the Debian image with containerd, kubelet and kubeadm) for amd64 and arm64 in bin/node-image: docs/kubeadm.md.

# Its guests take minutes; the same inputs again are a copy from the package cache.
$(BIN)/node-image/VERSIONS: $(shell find hack/nodeimage -type f) $(BIN)/debian/VERSIONS \
		$(foreach a,$(AGENT_ARCHS),$(BIN)/kube/$(a)/kubelet)
	mkdir -p $(BIN)
	hack/nodeimage/build.sh $(BIN)/debian $(BIN)/kube $(BIN)/node-image

esp: $(BIN)/esp.img ## The EFI system partition Ironic puts into the UEFI boot ISOs it builds (GRUB for amd64 and arm64).

$(BIN)/esp.img: $(shell find hack/esp -type f) hack/testos/archive.sh
	hack/esp/build.sh $@

agents: $(AGENTS) $(NODE_AGENTS) ## The build agent and the node agent for every architecture, in bin/build-agent/ARCH and bin/node-agent/ARCH.

$(BIN)/build-agent/%/anvil-build-agent: $(AGENT_SOURCES)
	CGO_ENABLED=0 GOARCH=$* go build -trimpath -ldflags "-s -w" -o $@ ./cmd/anvil-build-agent

$(BIN)/node-agent/%/anvil-node-agent: $(NODE_AGENT_SOURCES)
	CGO_ENABLED=0 GOARCH=$* go build -trimpath -ldflags "-s -w" -o $@ ./test/nodeagent/cmd/anvil-node-agent

# The images a kubeadm cluster pulls (docs/images.md): kube-apiserver, kube-controller-manager,
# kube-scheduler and kube-proxy (bin/kube/ARCH), etcd, coredns and pause, each one index for
# linux/amd64 and linux/arm64, as OCI image layouts in bin/kube-images with DIGESTS and SIZES.
# Rebuilt only when a binary or hack/kubeimages changes; pushed when REGISTRY is set
# (HOST[:PORT]/PREFIX, kubeadm's imageRepository; credentials from DOCKER_CONFIG).
KUBE_IMAGE_ARCHS := amd64 arm64
KUBE_IMAGE_BINS := $(foreach a,$(KUBE_IMAGE_ARCHS),$(foreach b,kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause,$(BIN)/kube/$(a)/$(b)))
KUBE_IMAGE_SOURCES := $(shell find hack/kubeimages internal/containerimage -type f -not -name '*_test.go') hack/images/debian.sh hack/images/fixups.sh hack/testos/archive.sh go.mod go.sum

kube-images: $(BIN)/kube-images/DIGESTS ## kubeadm's images (control plane, kube-proxy, etcd, coredns, pause) in bin/kube-images; pushed to REGISTRY when set.
	@cat $(BIN)/kube-images/SIZES
	$(if $(REGISTRY),go run ./hack/kubeimages push -out $(BIN)/kube-images -registry $(REGISTRY))

$(BIN)/kube-images/DIGESTS: $(KUBE_IMAGE_BINS) $(KUBE_IMAGE_SOURCES)
	go run ./hack/kubeimages build -bin $(BIN)/kube -out $(BIN)/kube-images

$(BIN)/kube/%/etcd: hack/tools/etcd/go.mod
	cd hack/tools/etcd && CGO_ENABLED=0 GOARCH=$* go build -trimpath -ldflags "-s -w" -o $@ go.etcd.io/etcd/server/v3

$(BIN)/kube/%/coredns: hack/tools/coredns/go.mod
	cd hack/tools/coredns && CGO_ENABLED=0 GOARCH=$* go build -trimpath -ldflags "-s -w" -o $@ github.com/coredns/coredns

$(BIN)/kube/%/pause: hack/kubeimages/pause/main.go
	CGO_ENABLED=0 GOARCH=$* go build -trimpath -ldflags "-s -w" -o $@ ./hack/kubeimages/pause

# anvil's container images (docs/images.md): anvil, anvil-qemu and anvil-metal, each one
# index for linux/amd64 and linux/arm64, as OCI image layouts in bin/images, with SIZES,
# DIGESTS and the Debian packages used (NAME.VERSIONS). Rebuilt only when anvil's sources,
# hack/images, the eraser or the EFI system partition change (Debian's .debs are cached in
# ~/.cache/anvil/images). Then pushed: to REGISTRY (HOST[:PORT]/PREFIX, credentials from
# DOCKER_CONFIG) when set, else to anvil dev's registry (127.0.0.1:5001/anvil) when it runs.
REGISTRY ?=
IMAGE_SOURCES := $(shell find cmd/anvil internal api config hack/images -type f -not -name '*_test.go') hack/testos/archive.sh go.mod go.sum

images: $(BIN)/images/SIZES ## Build anvil's container images into bin/images and push them (REGISTRY, default anvil dev's registry when it runs).
	@cat $(BIN)/images/SIZES
	go run ./hack/images push -out $(BIN)/images $(if $(REGISTRY),-registry $(REGISTRY))

$(BIN)/images/SIZES: $(IMAGE_SOURCES) $(BIN)/eraser/VERSIONS $(BIN)/esp.img
	go run ./hack/images build -out $(BIN)/images -bin $(BIN)

# anvil's own CRDs go to config/crd/bases (installed everywhere); the Cluster API provider's
# (infrastructure.cluster.x-k8s.io) to config/crd/capi, installed only beside Cluster API.
# A new API group is added to one of the two lists.
manifests: $(BIN)/controller-gen ## CRDs and RBAC roles from the Go types and markers.
	$(BIN)/controller-gen crd paths="./api/compute/...;./api/images/...;./api/metal/..." output:crd:artifacts:config=config/crd/bases
	$(BIN)/controller-gen crd paths=./api/infrastructure/... output:crd:artifacts:config=config/crd/capi
	$(BIN)/controller-gen rbac:roleName=anvil-manager paths="./internal/manager/...;./internal/consoleapi/...;./internal/controller/attachment/...;./internal/controller/claim/...;./internal/controller/index/...;./internal/controller/osimage/...;./internal/controller/scheduler/...;./internal/controller/secretaccess/..." output:rbac:artifacts:config=config/rbac
	$(BIN)/controller-gen rbac:roleName=anvil-capi-provider paths="./internal/capiprovider/...;./internal/controller/capi/..." output:rbac:artifacts:config=config/rbac/capiprovider
	$(BIN)/controller-gen rbac:roleName=anvil-metal paths="./internal/controller/host/...;./internal/runtime/metal/..." output:rbac:artifacts:config=config/rbac/metal
	$(BIN)/controller-gen rbac:roleName=anvil-poollet paths=./internal/poollet/... output:rbac:artifacts:config=config/rbac/poollet

generate: $(GENERATORS) ## Deepcopy functions and the MRI's protobuf code.
	$(BIN)/controller-gen object paths=./api/...
	protoc --plugin=protoc-gen-go=$(BIN)/protoc-gen-go --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc \
		--go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative \
		api/mri/v1alpha1/mri.proto api/poollet/v1alpha1/console.proto

# Regenerates everything and fails when that changed a tracked file or added one.
verify-generated: manifests generate
	@git diff --exit-code --stat -- api config internal || { echo "generated files were stale: commit the output of 'make manifests generate'"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- api config internal); \
	if [ -n "$$untracked" ]; then echo "generated files not committed: $$untracked"; exit 1; fi

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	go vet ./...

deps: ## System packages the tests and the demo need (idempotent).
	hack/install-deps.sh

test: deps ## Everything CI runs (test/install installs the images of make images).
	$(MAKE) test-setup
	$(MAKE) test-only

# The set-up's builds run two at a time: while one compiles, another downloads or packs.
# The Debian image first (from empty caches its TCG guests take about 40 minutes, mostly
# one core), with make kube's compiles beside it; make kube before the tools: the host's
# Kubernetes tools are built as it builds (the same flags), and a go build running beside
# another that compiles the same packages compiles them again. The images after
# verify-generated: it writes the generated files again (the same bytes, new times), which
# would leave bin/images older than its sources, and test/images then builds all three
# images itself instead of one against make's (16 minutes instead of a few in session 24's CI).
test-setup: ## What make test builds and checks before its tests (fresh-check times it apart).
	$(MAKE) -j2 testos debian kube eraser esp agents
	$(MAKE) -j2 tools kube-images node-image
	$(MAKE) verify-generated
	$(MAKE) -j2 $(BIN)/images/SIZES vet

test-only: ## Unit, integration and end-to-end tests, without the set-up steps.
	mkdir -p test-artifacts
	hack/test.sh $(GO_TEST_FLAGS)

# The one test make test leaves out (hack/test.sh says why): OS image builds on the Debian
# image for both architectures, apt through a package proxy, and their rollouts; about 35 minutes.
test-debian-builds: deps ## OS image builds on Debian (apt through a package proxy) and their rollouts: the test make test leaves out.
	$(MAKE) test-setup
	go test -count=1 -run '^TestDebianOSImagesBuildAndRollOut$$' -timeout 150m -v ./test/debian

# The other tests make test leaves out (hack/test.sh): kubeadm by hand in node-image guests,
# a control plane in one, then a cluster of an amd64 control plane and an arm64 worker on
# anvil dev's segment; about 35 minutes.
test-kubeadm: deps ## kubeadm in node-image guests (by hand: one control plane, a cluster of two architectures on a segment; and a Cluster API cluster of two architectures): the tests make test leaves out.
	$(MAKE) test-setup
	go test -count=1 -timeout 150m -v ./test/kubeadm

# Cluster API's own e2e specs (QuickStart, MachineDeployment scale and remediation) against anvil dev --capi,
# from the nested module test/capie2e (docs/capi.md, "Cluster API's e2e specs"); each spec makes
# a cluster of TCG guests: about 40 minutes a spec. FOCUS picks specs (a Ginkgo focus).
FOCUS ?=
test-capi-e2e: deps ## Cluster API's e2e specs (QuickStart, MachineDeployment scale and remediation) against anvil, from test/capie2e.
	$(MAKE) test-setup
	cd test/capie2e && go test -count=1 -timeout 180m -v . -args -ginkgo.v -ginkgo.no-color $(if $(FOCUS),-ginkgo.focus '$(FOCUS)')

# Every fuzz test, as package:FuzzTarget (docs/fuzzing.md). make test runs their seeds and
# testdata/fuzz inputs as ordinary tests; make fuzz fuzzes each for FUZZTIME, one after another.
FUZZ_TARGETS := \
	./internal/imagebuild/containerfile:FuzzContainerfile \
	./internal/nocloud:FuzzWriteISO \
	./internal/osimage:FuzzManifest \
	./internal/osimage:FuzzConfig \
	./internal/osimage:FuzzParseReference \
	./internal/osimage:FuzzCheckQCOW2 \
	./internal/poollet/firstboot:FuzzValidateIgnition \
	./internal/runtime/metal:FuzzConfigDrive \
	./internal/runtime/fake:FuzzMRI \
	./internal/runtime/qemu:FuzzMRI
FUZZTIME ?= 10m
# Each new interesting input is minimized this long: the gRPC targets find many (their
# goroutines make coverage vary), and minimizing each for seconds would stall them.
FUZZMINIMIZETIME ?= 10x
# More go test flags, e.g. FUZZFLAGS=-parallel=1 on a shared machine.
FUZZFLAGS ?=

fuzz: deps tools ## Every fuzz test for FUZZTIME (default 10m) each, one after another; failures are kept in testdata/fuzz.
	@listed=$$(printf '%s\n' $(FUZZ_TARGETS)); \
	found=$$(for f in $$(git ls-files '*fuzz_test.go'); do sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing.F).*/\1/p' $$f | sed "s|^|./$$(dirname $$f):|"; done); \
	missing=$$(grep -vxF -f <(echo "$$listed") <<<"$$found" || true); \
	if [ -n "$$missing" ]; then echo "fuzz tests missing from FUZZ_TARGETS in the Makefile: $$missing"; exit 1; fi
	@failed=""; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "== $$name ($$pkg) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $(FUZZFLAGS) $$pkg || failed="$$failed $$name($$pkg)"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzzing failed:$$failed; each failing input is under its package's testdata/fuzz"; exit 1; fi

CHAOS_SEED ?= 1
CHAOS_DURATION ?= 10m
# More flags of go run ./test/chaos, e.g. CHAOSFLAGS="-machines 1000 -keep".
CHAOSFLAGS ?=
chaos: deps tools testos esp ## The long chaos run: churn on fake, QEMU and metal pools (with emulated servers) while anvil's processes and the BMC emulator are SIGKILLed (CHAOS_SEED, CHAOS_DURATION).
	go run ./test/chaos -seed $(CHAOS_SEED) -duration $(CHAOS_DURATION) $(CHAOSFLAGS)

# make demo builds only what anvil dev runs (etcd, kube-apiserver, kubectl for the banner's
# commands; the test OS, eraser, ESP and build agents), so a newcomer's first command is as
# short as it can be; make test builds the rest. They are built two at a time (one compiles
# while another downloads).
# DEBIAN=1 adds Debian 12 Machines (config/samples/debian) beside the test OS ones: not by
# default, since make debian takes about 45 minutes the first time here (docs/debian.md).
DEMO_DEBIAN = $(if $(filter 1,$(DEBIAN)),debian)
DEMO_DEBIAN_FLAGS = $(if $(filter 1,$(DEBIAN)),--debian $(BIN)/debian --apply config/samples/debian)
demo: deps ## A local anvil with the sample objects (DEBIAN=1: and Debian ones): see README.
	$(MAKE) -j2 $(CONTROL_PLANE) testos eraser esp $(AGENTS) build $(DEMO_DEBIAN)
	$(BIN)/anvil dev --bin-dir $(BIN) --test-os $(BIN)/testos --agents $(BIN)/build-agent --emulated-servers 2 --emulated-arm64-servers 1 --apply config/samples $(DEMO_DEBIAN_FLAGS)

bench: tools testos eraser esp agents build ## Benchmarks and scenarios; figures are printed, never asserted.
	go test -run '^$$' -bench . -benchmem ./...
	go run ./test/scale/scheduling -machines 10000 -pools 1000 -rounds 2
	go run ./test/scale/pools -machines 10000 -pools 100
	go run ./test/scale/vmboot -rounds 3
	go run ./test/scale/vmboot -rounds 3 -arch arm64
	go run ./test/scale/metalhosts -hosts 200 -rounds 1
	go run ./test/scale/emulated -servers 1 -rounds 3
	go run ./test/scale/emulated -servers 10 -rounds 1
	go run ./test/scale/imagebuild -rounds 3
	go run ./test/scale/ui -machines 10000 -pools 1000

fresh-check: ## make test and make demo in a fresh clone with every cache empty, timed (hack/fresh-check.sh).
	hack/fresh-check.sh

clean:
	rm -rf $(BIN)/anvil .anvil
