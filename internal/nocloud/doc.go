// Package nocloud writes cloud-init NoCloud seeds: an ISO9660 image whose volume id is
// "cidata" holding user-data and meta-data, attached to a VM as a disk. The image carries
// Joliet names too, so every reader sees "user-data" and "meta-data" whatever its mapping of
// plain ISO9660 names, and it has fixed timestamps, so the same data gives the same bytes.
//
// It only writes seeds: it never reads one back, and never interprets the user data.
package nocloud
