// Package svcstate turns Service and EndpointSlice events into immutable
// snapshots of what every node-level consumer needs: the service ports with
// their addresses and policies, and the endpoints behind each port.
//
// One Tracker serves one consumer. The proxy modes, DNS and ingress each
// own a Tracker fed by their informers, call Snapshot when they are about to
// act, and get the snapshot plus the set of service ports that changed since
// their previous call. Snapshots share unchanged services with their
// predecessors, so taking one after a single-endpoint change costs the same
// at 10 services as at 10,000.
//
// Input is untrusted: objects may come from any API server. Whatever cannot
// be used (a malformed IP, a port out of range, an unknown protocol, a
// duplicate) is dropped, logged once and counted, and never affects other
// services.
package svcstate
