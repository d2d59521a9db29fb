// Package apis holds the runtime.Scheme of every kind svcnet serves, with
// the defaulting and field-label rules that kube-apiserver applies to them.
//
// svcnet stores and serves the versioned types of k8s.io/api directly. The
// generic API server machinery (k8s.io/apiserver) expects an "internal"
// hub version to convert through; registering the same Go types under the
// internal version makes every such conversion a plain copy.
package apis

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

var (
	// Scheme knows every served kind, in its external and internal version.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes JSON, YAML and protobuf for Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
	// ParameterCodec decodes query parameters into option structs.
	ParameterCodec = runtime.NewParameterCodec(Scheme)
)

// group is one served API group version and how to add it to a scheme.
type group struct {
	gv  schema.GroupVersion
	add func(*runtime.Scheme) error
}

// Groups lists the served group versions, in discovery order.
var groups = []group{
	{corev1.SchemeGroupVersion, corev1.AddToScheme},
	{appsv1.SchemeGroupVersion, appsv1.AddToScheme},
	{autoscalingv1.SchemeGroupVersion, autoscalingv1.AddToScheme},
	{batchv1.SchemeGroupVersion, batchv1.AddToScheme},
	{coordinationv1.SchemeGroupVersion, coordinationv1.AddToScheme},
	{discoveryv1.SchemeGroupVersion, discoveryv1.AddToScheme},
	{networkingv1.SchemeGroupVersion, networkingv1.AddToScheme},
	{rbacv1.SchemeGroupVersion, rbacv1.AddToScheme},
	{authenticationv1.SchemeGroupVersion, authenticationv1.AddToScheme},
	{authorizationv1.SchemeGroupVersion, authorizationv1.AddToScheme},
	{metricsv1beta1.SchemeGroupVersion, metricsv1beta1.AddToScheme},
}

func init() {
	utilruntime.Must(AddToScheme(Scheme))
}

// AddToScheme registers every served kind in s, with defaults and field labels.
func AddToScheme(s *runtime.Scheme) error {
	for _, g := range groups {
		if err := g.add(s); err != nil {
			return err
		}
		registerInternal(s, g.gv)
		if err := s.SetVersionPriority(g.gv); err != nil {
			return err
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	s.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{},
		&metav1.APIGroup{}, &metav1.APIResourceList{})
	addDefaultingFuncs(s)
	if err := addParameterConversions(s); err != nil {
		return err
	}
	return addFieldLabelConversions(s)
}

// registerInternal registers the kinds of gv's own package (not the meta
// types every group version carries) under the internal version as well.
func registerInternal(s *runtime.Scheme, gv schema.GroupVersion) {
	internal := schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}
	metaPkg := reflect.TypeOf(metav1.Status{}).PkgPath()
	for kind, t := range s.KnownTypes(gv) {
		if t.PkgPath() == metaPkg {
			continue
		}
		if _, known := s.KnownTypes(internal)[kind]; known {
			continue
		}
		s.AddKnownTypeWithName(internal.WithKind(kind), reflect.New(t).Interface().(runtime.Object))
	}
}
