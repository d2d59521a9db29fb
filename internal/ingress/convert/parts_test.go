package convert

import (
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		ingresses []string // namespace/name
		services  []string
		skipped   []string // substrings
		err       string
	}{
		{
			name:      "YAML documents, empty ones too",
			in:        "---\n# nothing\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: a}\n---\n\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: x}\n",
			ingresses: []string{"dflt/a"},
			services:  []string{"x/s"},
		},
		{
			name:      "JSON objects",
			in:        `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"a","namespace":"n"}} {"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"b"}}`,
			ingresses: []string{"n/a", "dflt/b"},
		},
		{
			name:      "a List of Lists",
			in:        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: networking.k8s.io/v1\n  kind: IngressList\n  items:\n  - apiVersion: networking.k8s.io/v1\n    kind: Ingress\n    metadata: {name: a}\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: d, namespace: nx}\n",
			ingresses: []string{"dflt/a"},
			skipped:   []string{"Deployment nx/d: not an Ingress or a Service"},
		},
		{
			name:    "an old Ingress",
			in:      "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: a}\n",
			skipped: []string{"Ingress a: extensions/v1beta1 is not read (write it as networking.k8s.io/v1)"},
		},
		{
			name: "not an object",
			in:   "apiVersion: networking.k8s.io/v1\nmetadata: {name: a}\n",
			err:  "f: document 1: not a Kubernetes object (no kind)",
		},
		{
			name: "an Ingress without a name",
			in:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata: {namespace: nx}\n",
			err:  "an Ingress without a name",
		},
		{
			name: "a bad field",
			in:   "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: a}\nspec: {rules: 3}\n",
			err:  "Ingress a: json: cannot unmarshal",
		},
		{
			name: "not YAML",
			in:   "apiVersion: [\n",
			err:  "f: document 1:",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Manifest
			err := m.Decode(strings.NewReader(tt.in), "f", "dflt")
			if settled(t, err, tt.err) {
				return
			}
			var ings, svcs []string
			for _, i := range m.Ingresses {
				ings = append(ings, i.Namespace+"/"+i.Name)
			}
			for _, s := range m.Services {
				svcs = append(svcs, s.Namespace+"/"+s.Name)
			}
			if !slices.Equal(ings, tt.ingresses) || !slices.Equal(svcs, tt.services) {
				t.Errorf("Ingresses %q, Services %q; want %q, %q", ings, svcs, tt.ingresses, tt.services)
			}
			if len(m.Skipped) != len(tt.skipped) {
				t.Fatalf("skipped %q, want %q", m.Skipped, tt.skipped)
			}
			for i, s := range tt.skipped {
				if !strings.Contains(m.Skipped[i], s) {
					t.Errorf("skipped %q, want %q", m.Skipped[i], s)
				}
			}
			if len(tt.services) > 0 && m.Lookup("x", "s") == nil {
				t.Error("Lookup finds no x/s")
			}
		})
	}
}

func TestNoIngresses(t *testing.T) {
	if _, err := Convert(nil, Options{}); err == nil || err.Error() != "no Ingresses to convert" {
		t.Errorf("err %v", err)
	}
}

func TestRegexForm(t *testing.T) {
	tests := []struct {
		path   string
		prefix string
		form   pathForm
		ok     bool
	}{
		{"/foo", "/foo", formLiteral, true},
		{"/v1.0", "/v1.0", formLiteral, true},
		{`/a\.b\/c\-d`, "/a.b/c-d", formLiteral, true},
		{"/foo(/|$)(.*)", "/foo", formElements, true},
		{"/foo/(.*)", "/foo", formSlash, true},
		{"/(.*)", "", formSlash, true},
		{"/foo/.*", "/foo", formSlashAny, true},
		{"/foo(.*)", "", 0, false},
		{"/v[0-9]+/(.*)", "", 0, false},
		{"/foo$", "", 0, false},
		{`/foo\d`, "", 0, false},
		{"(/|$)(.*)", "", formElements, true}, // an empty prefix, which convertPath makes "/"
		{"x/(.*)", "", 0, false},
	}
	for _, tt := range tests {
		prefix, form, ok := regexForm(tt.path)
		if ok != tt.ok || (ok && (prefix != tt.prefix || form != tt.form)) {
			t.Errorf("regexForm(%q) = %q, %d, %v; want %q, %d, %v", tt.path, prefix, form, ok, tt.prefix, tt.form, tt.ok)
		}
	}
}

func TestValidPath(t *testing.T) {
	for p, want := range map[string]string{
		"/":        "",
		"/a-b_c~d": "",
		"/%2e":     "",
		"a":        "it must start with /",
		"/a//b":    "it contains //",
		"/a/./b":   "it contains /./",
		"/a/%2F":   "it contains %2F",
		"/a/..":    "it ends with /..",
		"/a b":     "characters other than",
		"/a?b":     "characters other than",
		"/a#b":     "characters other than",
		"/%zz":     "characters other than",
		"/a/b/c/.": "it ends with /.",
	} {
		err := validPath(p)
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("validPath(%q) = %v, want %q", p, err, want)
		}
	}
}

func TestGatewayDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                   "0s",
		65 * time.Second:                    "1m5s",
		time.Hour + 1500*time.Millisecond:   "1h1s500ms",
		3 * time.Hour:                       "3h",
		1500*time.Microsecond + time.Second: "1s2ms",
	} {
		if got := gatewayDuration(d); string(got) != want {
			t.Errorf("gatewayDuration(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestNames(t *testing.T) {
	if got := objectName("web", "*.example.com"); got != "web-wildcard.example.com" {
		t.Errorf("objectName: %s", got)
	}
	if got := listenerName("*.example.com"); got != "https-wildcard-example-com" {
		t.Errorf("listenerName: %s", got)
	}
	long := objectName(strings.Repeat("a", 200), strings.Repeat("b", 100))
	other := objectName(strings.Repeat("a", 200), strings.Repeat("b", 101))
	if len(long) != maxName || long == other || !strings.HasPrefix(long, strings.Repeat("a", 200)+"-") {
		t.Errorf("long names %q, %q", long, other)
	}
	n := names{"a": true}
	if got := []string{n.unique("a"), n.unique("a"), n.unique("b")}; !slices.Equal(got, []string{"a-2", "a-3", "b"}) {
		t.Errorf("unique: %q", got)
	}
	if got := n.unique(strings.Repeat("c", maxName)); len(got) != maxName {
		t.Errorf("unique of a long name: %d characters", len(got))
	}
	if got := n.unique(strings.Repeat("c", maxName)); len(got) != maxName || !strings.HasSuffix(got, "-2") {
		t.Errorf("unique of a long name again: %q", got)
	}
}

func TestNoteString(t *testing.T) {
	nn := types.NamespacedName{Namespace: "ns", Name: "a"}
	for _, tt := range []struct {
		n    Note
		want string
	}{
		{Note{Kind: NotCarriedOver, Ingress: nn, Annotation: "x/y", Message: "why"}, "not carried over: x/y on ns/a: why"},
		{Note{Kind: LeftOut, Ingress: nn, Message: "path"}, "left out: ns/a: path"},
		{Note{Kind: Caveat, Ingress: nn, Message: "m"}, "note: ns/a: m"},
		{Note{Kind: Caveat, Ingress: nn, Annotation: "x/y", Message: "m"}, "note: x/y on ns/a: m"},
	} {
		if got := tt.n.String(); got != tt.want {
			t.Errorf("%q, want %q", got, tt.want)
		}
	}
}

// TestCarriedEverySetting: every setting read, under the prefixes it is
// read under, is carried over or named, on a canary and on a primary.
func TestCarriedEverySetting(t *testing.T) {
	for _, canary := range []bool{false, true} {
		ann := map[string]string{}
		for _, s := range settingsTable {
			ann[nginxPrefix+s.name] = "1"
			if !s.nginxOnly {
				ann[svcnetPrefix+s.name] = "2"
			}
		}
		if canary {
			ann[nginxPrefix+"canary"], ann[svcnetPrefix+"canary"] = "true", "true"
		}
		ing := &networkingv1.Ingress{}
		ing.Namespace, ing.Name, ing.Annotations = "ns", "a", ann
		nn := types.NamespacedName{Namespace: "ns", Name: "a"}
		_, carried, notes := parseSettings(nn, ann, "svcnet")
		checkCarried(t, []*networkingv1.Ingress{ing}, &Result{Carried: map[types.NamespacedName][]string{nn: carried}, Notes: notes})
		for _, k := range carried {
			if slices.ContainsFunc(notes, func(n Note) bool { return n.Kind == NotCarriedOver && n.Annotation == k }) {
				t.Errorf("canary %v: %s is carried over and named", canary, k)
			}
		}
	}
}

// settled checks a case's error against want (an expected message part,
// or "" for none) and says whether the case ends there.
func settled(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
