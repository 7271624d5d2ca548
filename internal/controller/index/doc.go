// Package index registers the field indexes anvil's controllers look objects up by, once
// per manager, so no controller lists a whole kind to find a few objects.
package index
