package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// crdDir holds the standard channel's CRDs of the Gateway API version in
// go.mod (deploy's gatewaysync keeps them equal to the module's).
const crdDir = "../../../deploy/gateway-api"

// crdSchema is what the API server checks an object of one kind with.
type crdSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// loadCRDs reads the v1 schema of each kind.
func loadCRDs(t *testing.T) map[string]*crdSchema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s (%v)", crdDir, err)
	}
	out := map[string]*crdSchema{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != "v1" || v.Schema == nil {
				continue
			}
			var internal apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				t.Fatal(err)
			}
			ss, err := structuralschema.NewStructural(&internal)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			validator, _, err := apiservervalidation.NewSchemaValidator(&internal)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out[crd.Spec.Names.Kind] = &crdSchema{structural: ss, validator: validator, cel: cel.NewValidator(ss, true, celconfig.PerCallLimit)}
		}
	}
	return out
}

// validateStream checks every document of a printed stream as the API
// server would on create: defaults, no unknown fields (the standard
// channel's schema), the OpenAPI schema and the CEL rules, and a valid
// name.
func validateStream(t *testing.T, crds map[string]*crdSchema, stream []byte) {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for i := 1; ; i++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue // the comment block
		}
		// Integers as int64, as the API server decodes them.
		var obj map[string]any
		if err := utiljson.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if obj == nil {
			continue
		}
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		s := crds[kind]
		if s == nil {
			t.Errorf("document %d: kind %q has no CRD", i, kind)
			continue
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("%s %q: %v", kind, name, errs)
		}
		structuraldefaulting.Default(obj, s.structural)
		if unknown := structuralpruning.PruneWithOptions(obj, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(unknown) > 0 {
			t.Errorf("%s %s: fields the standard channel does not have: %v", kind, name, unknown)
		}
		if errs := apiservervalidation.ValidateCustomResource(nil, obj, s.validator); len(errs) > 0 {
			t.Errorf("%s %s: %v", kind, name, errs.ToAggregate())
		}
		if errs, _ := s.cel.Validate(t.Context(), nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
			t.Errorf("%s %s: %v", kind, name, errs.ToAggregate())
		}
	}
}

// checkCarried holds the conversion to its invariant: every annotation
// of every Ingress (kubectl's record aside) is carried over or named in
// a NotCarriedOver Note.
func checkCarried(t *testing.T, ings []*networkingv1.Ingress, res *Result) {
	t.Helper()
	for _, ing := range ings {
		nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		for k := range ing.Annotations {
			if k == lastApplied {
				continue
			}
			carried := slices.Contains(res.Carried[nn], k)
			named := slices.ContainsFunc(res.Notes, func(n Note) bool {
				return n.Kind == NotCarriedOver && n.Ingress == nn && n.Annotation == k
			})
			if !carried && !named {
				t.Errorf("%s: annotation %s is neither carried over nor named", nn, k)
			}
		}
	}
}

// mustJSON is v as JSON, for messages.
func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
