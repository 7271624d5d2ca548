// Command anvil is the one binary of anvil: `anvil dev` (a whole local anvil), `anvil
// manager` (the controller manager), `anvil poollet` (the agent of one pool), `anvil
// runtime fake` (the in-memory runtime), and later the other runtimes and image tools.
package main
