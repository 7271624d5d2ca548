//go:build tools

// Package gen pins the code generators: controller-gen for CRDs, RBAC and deepcopy, and the
// protobuf plugins for the Machine Runtime Interface.
package gen

import (
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
