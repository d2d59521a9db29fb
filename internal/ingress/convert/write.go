package convert

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// Write prints the result as a YAML stream: a comment block naming the
// Ingresses and every Note, then the Gateway, the ReferenceGrants and
// the HTTPRoutes, one document each, as `kubectl apply -f` takes them.
func Write(w io.Writer, r *Result) error {
	var b strings.Builder
	b.WriteString("# Gateway API objects made by svcnet ingress convert from the Ingresses\n")
	for _, nn := range r.Ingresses {
		fmt.Fprintf(&b, "#   %s\n", nn)
	}
	if len(r.Notes) > 0 {
		b.WriteString("#\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "# %s\n", strings.ReplaceAll(n.String(), "\n", " "))
		}
	}
	objs := []any{r.Gateway}
	for _, g := range r.ReferenceGrants {
		objs = append(objs, g)
	}
	for _, h := range r.HTTPRoutes {
		objs = append(objs, h)
	}
	for _, o := range objs {
		y, err := marshal(o)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// marshal is an object as YAML without what the API server fills in:
// the status and the creation time.
func marshal(o any) ([]byte, error) {
	j, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	return yaml.Marshal(m)
}
