// Package convert turns Ingresses written for ingress-nginx into the
// Gateway API objects that do the same (issue 37): one Gateway with an
// HTTP listener on port 80 and an HTTPS listener on 443 per TLS host,
// an HTTPRoute per Ingress, and the ReferenceGrants that references
// across namespaces need (the Gateway's to Secrets, a route's to a
// canary's Service). It backs `svcnet ingress convert`.
//
// It is pure: Ingresses (and, to resolve named Service ports, an
// optional Service lookup) in; typed objects and Notes out. Nothing of
// an Ingress is dropped without a Note: each of its annotations
// (kubectl's last-applied record aside) is either carried over
// (Result.Carried) or named (NotCarriedOver, with the reason), and a
// path, backend or TLS entry that cannot be converted is named
// (LeftOut). Where the Gateway API does the same thing only nearly, a
// Caveat says how it differs.
//
// Annotations mean what ingress-nginx makes them mean, since the
// Ingresses come from ingress-nginx; svcnet.dev/ names mean what svcnet
// ingress makes them mean (internal/ingress/annotations). The two differ
// in one place: a rewrite-target without capture groups, which
// ingress-nginx puts in place of the whole path and svcnet ingress in
// place of the matched prefix.
//
// manifest.go reads Ingresses and Services from YAML or JSON streams and
// write.go prints the result, so that the command and the golden tests
// share them.
package convert
