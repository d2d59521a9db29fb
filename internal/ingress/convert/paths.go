package convert

import (
	"fmt"
	"regexp"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// pathOut is an Ingress path as the Gateway API matches it, and the
// rewrite of the path that goes with it (nil: none).
type pathOut struct {
	match   gatewayv1.HTTPPathMatch
	rewrite *gatewayv1.HTTPPathModifier
}

// pathProblem is why a path cannot be converted; annotation names the
// annotation to blame ("" when the path itself cannot be).
type pathProblem struct {
	annotation, message string
}

// pathForm is the shape of a path that ingress-nginx reads as a regular
// expression, among those a PathPrefix match can stand for.
type pathForm int

const (
	// formLiteral matches only itself: /foo.
	formLiteral pathForm = iota
	// formElements is PREFIX(/|$)(.*): the prefix as whole path
	// elements, the rest in $2 (ingress-nginx's own rewrite example).
	formElements
	// formSlash is PREFIX/(.*): the rest after a slash in $1.
	formSlash
	// formSlashAny is PREFIX/.*: the same without a capture.
	formSlashAny
)

var formSuffixes = []struct {
	suffix string
	form   pathForm
}{{"(/|$)(.*)", formElements}, {"/(.*)", formSlash}, {"/.*", formSlashAny}}

// regexMeta are the characters with a meaning in ingress-nginx's
// (PCRE's) regular expressions. An unescaped '.' is taken as a dot, as
// it is meant in paths like /v1.0: the match is narrower, never wider.
const regexMeta = `\+*?()|[]{}^$`

// literal reads a regular expression that matches nothing but one
// string (escapes undone), and that string.
func literal(re string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(re); i++ {
		c := re[i]
		switch {
		case c == '\\':
			if i+1 == len(re) || !strings.ContainsRune(regexMeta+"./-", rune(re[i+1])) {
				return "", false
			}
			i++
			b.WriteByte(re[i])
		case strings.IndexByte(regexMeta, c) >= 0:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// regexForm reads a path that ingress-nginx takes as a regular
// expression: its literal prefix and its form.
func regexForm(p string) (string, pathForm, bool) {
	if l, ok := literal(p); ok {
		return l, formLiteral, true
	}
	for _, f := range formSuffixes {
		if rest, found := strings.CutSuffix(p, f.suffix); found {
			if l, ok := literal(rest); ok && (l == "" || strings.HasPrefix(l, "/")) {
				return l, f.form, true
			}
		}
	}
	return "", 0, false
}

// convertPath converts one path of an Ingress with settings s. caveats
// are worth a Note; a problem leaves the path out.
func convertPath(path string, pathType *networkingv1.PathType, s *settings) (out pathOut, caveats []string, problem *pathProblem) {
	pt := networkingv1.PathTypeImplementationSpecific
	if pathType != nil {
		pt = *pathType
	}
	prefix, form := path, formLiteral
	if s.regex {
		var ok bool
		if prefix, form, ok = regexForm(path); !ok {
			return out, nil, &pathProblem{s.regexKey, fmt.Sprintf("path %q is a regular expression to ingress-nginx that no Gateway API path match stands for "+
				"(a plain prefix, PREFIX(/|$)(.*), PREFIX/(.*) and PREFIX/.* convert): left out", path)}
		}
	}
	if form == formLiteral && pt == networkingv1.PathTypeExact {
		out.match = pathMatch(gatewayv1.PathMatchExact, prefix)
	} else {
		v := strings.TrimSuffix(prefix, "/")
		if v == "" {
			v = "/"
		}
		out.match = pathMatch(gatewayv1.PathMatchPathPrefix, v)
		switch {
		case form == formSlash || form == formSlashAny:
			caveats = append(caveats, fmt.Sprintf("path %q is PathPrefix %s: %s itself matches too (ingress-nginx wanted a slash after it)", path, v, v))
		case pt == networkingv1.PathTypeImplementationSpecific && !s.regex && !strings.HasSuffix(path, "/"):
			caveats = append(caveats, fmt.Sprintf("ImplementationSpecific path %q is PathPrefix %s, by whole path elements: %s/x matches it, %sx no longer does", path, v, v, v))
		}
	}
	if err := validPath(*out.match.Value); err != nil {
		return out, nil, &pathProblem{"", fmt.Sprintf("path %q is not one the Gateway API takes (%v): left out", path, err)}
	}
	if s.rewrite == "" {
		return out, caveats, nil
	}
	rw, more, problem := rewritePath(path, form, *out.match.Type, s)
	out.rewrite = rw
	return out, append(caveats, more...), problem
}

// rewritePath converts the rewrite-target of a path.
func rewritePath(path string, form pathForm, match gatewayv1.PathMatchType, s *settings) (*gatewayv1.HTTPPathModifier, []string, *pathProblem) {
	t := s.rewrite
	bad := func(format string, args ...any) (*gatewayv1.HTTPPathModifier, []string, *pathProblem) {
		return nil, nil, &pathProblem{s.rewriteKey, fmt.Sprintf(format, args...) + fmt.Sprintf(": path %q left out", path)}
	}
	if !s.nginxRewrite {
		// svcnet ingress's meaning: the matched prefix is replaced, an
		// Exact path whole.
		if match == gatewayv1.PathMatchExact {
			return fullPath(t), nil, nil
		}
		return prefixPath(t), nil, nil
	}
	if !strings.Contains(t, "$") {
		// ingress-nginx puts the target in place of the whole path.
		if err := validTarget(t); err != nil {
			return bad("%q %v", t, err)
		}
		return fullPath(t), nil, nil
	}
	var group string
	switch form {
	case formElements:
		group = "/$2"
	case formSlash:
		group = "/$1"
	default:
		return bad("%q takes capture groups, and path %q has none that a PathPrefix match stands for", t, path)
	}
	head, found := strings.CutSuffix(t, group)
	if !found || strings.Contains(head, "$") {
		return bad("%q is not a prefix replacement, which for this path is TARGET%s with no other group: the Gateway API rewrites a matched prefix or the whole path, nothing else", t, group)
	}
	if head != "" {
		if err := validTarget(head); err != nil {
			return bad("%q %v", t, err)
		}
	}
	if head == "" {
		return prefixPath("/"), nil, nil
	}
	var caveats []string
	if form == formElements {
		caveats = append(caveats, fmt.Sprintf("rewrite-target %q: a request for the prefix alone, with no slash after it, is sent as %s (ingress-nginx sent %s/)", t, head, head))
	}
	return prefixPath(head), caveats, nil
}

// defaultRewrite is the rewrite of a defaultBackend's rule: both svcnet
// ingress and ingress-nginx send it the target; capture groups have no
// meaning there.
func defaultRewrite(s *settings) (*gatewayv1.HTTPPathModifier, string) {
	switch {
	case s.rewrite == "":
		return nil, ""
	case strings.Contains(s.rewrite, "$"):
		return nil, fmt.Sprintf("rewrite-target %q: its capture groups mean nothing to the defaultBackend, whose requests are not rewritten", s.rewrite)
	case validTarget(s.rewrite) != nil:
		return nil, fmt.Sprintf("rewrite-target %q is not a path: the defaultBackend's requests are not rewritten", s.rewrite)
	}
	return fullPath(s.rewrite), ""
}

func pathMatch(t gatewayv1.PathMatchType, v string) gatewayv1.HTTPPathMatch {
	return gatewayv1.HTTPPathMatch{Type: &t, Value: &v}
}

func fullPath(p string) *gatewayv1.HTTPPathModifier {
	return &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: &p}
}

func prefixPath(p string) *gatewayv1.HTTPPathModifier {
	return &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: &p}
}

// pathChars are the characters of an Exact or PathPrefix value.
var pathChars = regexp.MustCompile(`^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$`)

// validPath holds a path to the Gateway API's rules for Exact and
// PathPrefix values.
func validPath(v string) error {
	switch {
	case !strings.HasPrefix(v, "/"):
		return fmt.Errorf("it must start with /")
	case len(v) > 1024:
		return fmt.Errorf("over 1024 characters")
	case !pathChars.MatchString(v):
		return fmt.Errorf("characters other than letters, digits, -._~!$&'()*+,;=:@/ and %%XX")
	}
	for _, bad := range []string{"//", "/./", "/../", "%2f", "%2F", "#"} {
		if strings.Contains(v, bad) {
			return fmt.Errorf("it contains %s", bad)
		}
	}
	for _, bad := range []string{"/..", "/."} {
		if strings.HasSuffix(v, bad) {
			return fmt.Errorf("it ends with %s", bad)
		}
	}
	return nil
}

// validTarget checks a path that replaces a request's: the Gateway API
// sets no query string.
func validTarget(t string) error {
	switch {
	case !strings.HasPrefix(t, "/"):
		return fmt.Errorf("is not a path (it must start with /)")
	case strings.ContainsAny(t, "?#"):
		return fmt.Errorf("sets a query string, which the Gateway API's URLRewrite cannot")
	case len(t) > 1024:
		return fmt.Errorf("is over 1024 characters")
	case strings.ContainsAny(t, " \t\r\n"):
		return fmt.Errorf("is not a path")
	}
	return nil
}
