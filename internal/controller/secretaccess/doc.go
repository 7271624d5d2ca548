// Package secretaccess is the controller that lets each pool's poollet read exactly the
// Secrets its Machines reference, and no other: per pool and namespace, a Role granting
// get on those Secret names, bound to the pool's poollet ServiceAccount. Roles that no
// longer grant anything are deleted.
//
// It never reads a Secret's data; it only names Secrets in Roles.
package secretaccess
