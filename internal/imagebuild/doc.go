// Package imagebuild holds the pure decisions of OS image builds: each architecture's input
// hash (what can change that architecture's output, canonically encoded, so reordering
// anything changes nothing and one architecture's change never touches another's), the
// architectures an OSImage builds for, the names of builds and of their tags, and what may
// be published once the builds end.
//
// It does no I/O: the controller reads the OSImage, its context and the registry, calls in
// here, and writes what it is told.
package imagebuild
