// Package proxy_test runs `svcnet proxy` against the real kernel: every
// test builds its own small network in namespaces (a node with a pod
// bridge, pods, a client outside the node), never touching the host's
// network, and removes it when it ends.
//
// The API server runs in the test's own namespace on loopback, as
// everywhere else in the end-to-end tests; the proxy runs inside the node
// namespace (`ip netns exec`), and reaches the API server through a
// forwarder of the test process: a listener on 127.0.0.1:<API port>
// inside the node namespace whose connections the test process joins to
// 127.0.0.1:<API port> in its own. No address, route or rule is added to
// the host's namespace for it; the API server's kubeconfigs work
// unchanged inside the node.
package proxy_test

import "net/netip"

func netipPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
