// Package route turns Ingresses into an immutable routing table and
// answers, for one request's host and path, which backend serves it. It is
// pure: no API, no network, no clock. The controller builds a new Table on
// every change and the proxy swaps it in atomically.
//
// The rules are networking.k8s.io/v1's:
//   - Exact matches the path exactly, case-sensitively. Prefix matches
//     element by element on "/"-split paths, a trailing slash ignored on
//     both sides: /foo matches /foo, /foo/ and /foo/bar, not /foobar.
//     ImplementationSpecific is Prefix here.
//   - The longest matching path wins; Exact beats Prefix on a tie (an
//     Exact rule that matches is never shorter than a matching prefix, so
//     it always wins).
//   - Hosts match exactly, or by a wildcard *.foo.com that stands for
//     exactly one label. A request picks one host first: exact, else
//     wildcard, else the rules without a host. It does not fall through to
//     a less specific host when none of the chosen host's paths match
//     (ingress-nginx's server blocks behave the same way); it gets that
//     host's default backend, else the class's catch-all, else 404.
//   - Ingresses are merged per host. When two claim the same host, path
//     and path type, the oldest (creation time, then namespace/name) wins
//     and the other gets a Problem naming the winner.
//   - An Ingress's defaultBackend serves the requests to its own hosts that
//     none of the paths match; an Ingress with a defaultBackend and no rules
//     is the catch-all for everything no rule matches (the oldest wins).
//
// Requests are matched on a cleaned path: repeated slashes merged, "." and
// ".." resolved (never above the root). A path such as /public/../admin is
// matched, and forwarded, as /admin, so a prefix cannot be escaped with
// dot segments.
package route
