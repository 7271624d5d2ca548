// Command broker measures what a broker hop costs, on a region whose broker pool reaches
// a site with a fake pool (test/sites, anvil's processes as child processes):
//
//   - create → Running of -machines Machines created in the site itself (direct) and in
//     the region, crossing the broker into the same site (hop), alternating, -rounds of
//     each, deleted between rounds; the ratio of the medians hop ÷ direct;
//   - the capacity propagation delay: a Machine created (or deleted) directly in the site
//     → the region's broker pool's status.allocatable changes, -samples times, with the
//     poollets' -interval.
//
// It prints one JSON object.
//
//	go run ./test/scale/broker -machines 1000 -rounds 3
//	go run ./test/scale/broker -machines 0 -interval 1s
package main
