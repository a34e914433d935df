// Package sim serves the part of Neutron's and Octavia's HTTP APIs that internal/openstack's clients use, over
// the in-memory stores of internal/openstack/fake, for Raven's scale benchmark: the request and answer shapes
// are the real services', lists come in pages (limit, marker) and take the filters Raven sends, and every
// request is held as long as a latency Model says, with as many served at once per service as the model
// allows. The stores are indexed, so that lists and creates do not look at every port of 150,000.
//
// GET /sim/stats tells what was served and what is held; POST /sim/reset zeroes the counters; POST
// /sim/latency?on=false serves at full speed (the model is not applied) until ?on=true.
package sim
