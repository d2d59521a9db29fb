package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxName is the longest object name (a DNS subdomain) and the longest
// listener name (SectionName).
const maxName = 253

// objectName joins parts with "-" into an object name: a DNS subdomain
// (lower-case letters, digits, '-' and '.'), as Ingress names and hosts
// already are; a wildcard host's "*" is spelled "wildcard". A name over
// 253 characters is cut and ends in a digest of the whole, so that two
// long names stay apart.
func objectName(parts ...string) string {
	return fit(strings.ReplaceAll(strings.Join(parts, "-"), "*", "wildcard"))
}

// listenerName is the name of the HTTPS listener of a host: a
// SectionName has no dots.
func listenerName(host string) string {
	if host == "" {
		return "https"
	}
	h := strings.ReplaceAll(strings.ReplaceAll(host, "*", "wildcard"), ".", "-")
	return fit("https-" + h)
}

func fit(name string) string {
	if len(name) <= maxName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	cut := strings.TrimRight(name[:maxName-9], "-.")
	return cut + "-" + hex.EncodeToString(sum[:4])
}

// names hands out names unique among those it gave: a name given
// before gets "-2", "-3", … (the Ingresses' own names come first, so
// they keep theirs).
type names map[string]bool

func (n names) unique(name string) string {
	if !n[name] {
		n[name] = true
		return name
	}
	for i := 2; ; i++ {
		suffix := "-" + strconv.Itoa(i)
		c := name
		if len(c)+len(suffix) > maxName {
			c = strings.TrimRight(c[:maxName-len(suffix)], "-.")
		}
		c += suffix
		if !n[c] {
			n[c] = true
			return c
		}
	}
}
