package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Manifest is what the conversion reads from YAML or JSON streams: the
// Ingresses, and the Services that resolve their named ports.
type Manifest struct {
	Ingresses []*networkingv1.Ingress
	Services  []*corev1.Service
	// Skipped names the objects of other kinds or versions, and why.
	Skipped []string
}

// Decode adds the objects of a stream (source names it in errors): YAML
// documents or JSON objects, one or many, Lists' items included.
// Objects without a namespace get namespace.
func (m *Manifest) Decode(r io.Reader, source, namespace string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for i := 1; ; i++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if err := m.add(raw, namespace); err != nil {
			return fmt.Errorf("%s: document %d: %w", source, i, err)
		}
	}
}

// Lookup finds the Services decoded.
func (m *Manifest) Lookup(namespace, name string) *corev1.Service {
	for _, s := range m.Services {
		if s.Namespace == namespace && s.Name == name {
			return s
		}
	}
	return nil
}

func (m *Manifest) add(raw json.RawMessage, namespace string) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil // an empty document
	}
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
		Metadata   struct {
			Namespace, Name string
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return err
	}
	what := fmt.Sprintf("%s %s", head.Kind, head.Metadata.Name)
	if head.Metadata.Namespace != "" {
		what = fmt.Sprintf("%s %s/%s", head.Kind, head.Metadata.Namespace, head.Metadata.Name)
	}
	switch {
	case head.Kind == "":
		return fmt.Errorf("not a Kubernetes object (no kind)")
	case strings.HasSuffix(head.Kind, "List") && head.Items != nil:
		for _, item := range head.Items {
			if err := m.add(item, namespace); err != nil {
				return err
			}
		}
	case head.Kind == "Ingress" && head.APIVersion == networkingv1.SchemeGroupVersion.String():
		ing := &networkingv1.Ingress{}
		if err := json.Unmarshal(raw, ing); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ing.Name == "" {
			return fmt.Errorf("an Ingress without a name")
		}
		if ing.Namespace == "" {
			ing.Namespace = namespace
		}
		m.Ingresses = append(m.Ingresses, ing)
	case head.Kind == "Ingress":
		m.Skipped = append(m.Skipped, fmt.Sprintf("%s: %s is not read (write it as networking.k8s.io/v1)", what, head.APIVersion))
	case head.Kind == "Service" && head.APIVersion == "v1":
		svc := &corev1.Service{}
		if err := json.Unmarshal(raw, svc); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if svc.Namespace == "" {
			svc.Namespace = namespace
		}
		m.Services = append(m.Services, svc)
	default:
		m.Skipped = append(m.Skipped, fmt.Sprintf("%s: not an Ingress or a Service", what))
	}
	return nil
}
