package deploy

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestGatewayComponent: the gateway component is one bundle of the
// standard channel: every CRD carries the same bundle version and the
// standard channel, the kinds the controller watches
// are served at v1, and nothing but CRDs is in it.
func TestGatewayComponent(t *testing.T) {
	c, err := Lookup("gateway")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := c.Objects(values().Map())
	if err != nil {
		t.Fatal(err)
	}
	crds, rest := CRDs(objs)
	// gatewaysync's test holds the files to the module go.mod requires;
	// here, each is of the same bundle.
	version := crds[0].Annotations["gateway.networking.k8s.io/bundle-version"]
	if !strings.HasPrefix(version, "v1.") {
		t.Errorf("bundle version %q", version)
	}
	served := map[string]bool{}
	for _, crd := range crds {
		if crd.Spec.Group != gatewayv1.GroupName {
			t.Errorf("CRD %s: group %s", crd.Name, crd.Spec.Group)
		}
		if v := crd.Annotations["gateway.networking.k8s.io/bundle-version"]; v != version {
			t.Errorf("CRD %s: bundle version %q, want %q", crd.Name, v, version)
		}
		if ch := crd.Annotations["gateway.networking.k8s.io/channel"]; ch != "standard" {
			t.Errorf("CRD %s: channel %q", crd.Name, ch)
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served[crd.Spec.Names.Kind+"/"+v.Name] = true
			}
		}
	}
	for _, kind := range []string{"GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant"} {
		if !served[kind+"/v1"] {
			t.Errorf("%s is not served at v1 (served: %v)", kind, served)
		}
	}
	if len(crds) < 5 || len(rest) != 0 {
		t.Errorf("%d CRDs and other objects %v, want CRDs only", len(crds), rest)
	}
}

// TestRawDirectory: a directory component is its files joined into one
// stream, each document whole.
func TestRawDirectory(t *testing.T) {
	c, _ := Lookup("gateway")
	raw, err := c.Raw()
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := files.ReadDir(GatewayAPIDir)
	var total int
	for _, e := range entries {
		b, _ := files.ReadFile(GatewayAPIDir + "/" + e.Name())
		total += len(b)
		if !strings.Contains(string(raw), string(b)) {
			t.Errorf("%s is not in the stream whole", e.Name())
		}
	}
	if len(raw) < total {
		t.Errorf("stream of %d bytes, files of %d", len(raw), total)
	}
}

// TestCreateCRDs: CRDs are created and waited for until established; an
// existing one is left alone; one that never gets established is named.
func TestCreateCRDs(t *testing.T) {
	established := func(name string, ok bool) *apiextensionsv1.CustomResourceDefinition {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		crd.Name = name
		if ok {
			crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
				{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
		}
		return crd
	}
	// The fake keeps what it is given: a status set here stands for the
	// API server establishing the CRD.
	c := apiextensionsfake.NewClientset(established("a.example.com", true))
	crds := []*apiextensionsv1.CustomResourceDefinition{established("a.example.com", false), established("b.example.com", true)}
	if err := CreateCRDs(t.Context(), c, crds, time.Second); err != nil {
		t.Fatal(err)
	}
	list, _ := c.ApiextensionsV1().CustomResourceDefinitions().List(t.Context(), metav1.ListOptions{})
	if len(list.Items) != 2 {
		t.Errorf("%d CRDs, want 2", len(list.Items))
	}
	crds = append(crds, established("c.example.com", false))
	err := CreateCRDs(t.Context(), c, crds, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "c.example.com not established") {
		t.Errorf("err %v, want c.example.com named", err)
	}
}

func TestEstablished(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if Established(crd) {
		t.Error("no conditions: established")
	}
	crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse}}
	if Established(crd) {
		t.Error("Established=False: established")
	}
	crd.Status.Conditions[0].Status = apiextensionsv1.ConditionTrue
	if !Established(crd) {
		t.Error("Established=True: not established")
	}
}

// TestGatewayCRDsValid: the API server would accept every CRD of the
// component: apiextensions-apiserver's own create validation (the
// structural schemas, and the CEL rules compiled within their cost
// budget), as svcnet's API server runs it.
func TestGatewayCRDsValid(t *testing.T) {
	c, _ := Lookup("gateway")
	objs, err := c.Objects(values().Map())
	if err != nil {
		t.Fatal(err)
	}
	crds, _ := CRDs(objs)
	validate := func(crd *apiextensionsv1.CustomResourceDefinition) error {
		v1 := crd.DeepCopy()
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
		var internal apiextensions.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, &internal, nil); err != nil {
			return err
		}
		return apiextensionsvalidation.ValidateCustomResourceDefinition(t.Context(), &internal).ToAggregate()
	}
	for _, crd := range crds {
		if err := validate(crd); err != nil {
			t.Errorf("%s: %v", crd.Name, err)
		}
	}
	// The check sees the CEL rules: a broken one is refused.
	bad := crds[0].DeepCopy()
	schema := bad.Spec.Versions[0].Schema.OpenAPIV3Schema
	schema.XValidations = append(schema.XValidations, apiextensionsv1.ValidationRule{Rule: "self.spec.nosuchfield("})
	if err := validate(bad); err == nil || !strings.Contains(err.Error(), "x-kubernetes-validations") {
		t.Errorf("a broken CEL rule: err %v", err)
	}
}
