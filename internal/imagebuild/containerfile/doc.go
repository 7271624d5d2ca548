// Package containerfile reads the Containerfiles of an OSImage: the subset anvil builds (ARG,
// ENV, RUN, COPY, WORKDIR, LABEL; FROM is implicit) parsed with buildkit's Dockerfile parser,
// and interpreted for one architecture into a Program of concrete operations, with every
// variable expanded and every COPY source resolved to context files.
//
// The controller uses it to refuse a recipe before any build starts and to learn which
// context files an architecture's build reads; the build agent uses the same Program to run
// the build, so the two can never disagree about what a recipe means. It does no I/O.
package containerfile
