package apis

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FieldLabels lists, per kind, the field selectors kube-apiserver accepts
// beyond metadata.name and metadata.namespace.
var FieldLabels = map[schema.GroupVersionKind][]string{
	corev1.SchemeGroupVersion.WithKind("Pod"): {
		"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
		"spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
	},
	corev1.SchemeGroupVersion.WithKind("Node"):      {"spec.unschedulable"},
	corev1.SchemeGroupVersion.WithKind("Namespace"): {"status.phase"},
	corev1.SchemeGroupVersion.WithKind("Secret"):    {"type"},
	corev1.SchemeGroupVersion.WithKind("Service"):   {"spec.clusterIP", "spec.type"},
	corev1.SchemeGroupVersion.WithKind("Event"): {
		"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
		"involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
		"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
	},
	appsv1.SchemeGroupVersion.WithKind("ReplicaSet"): {"status.replicas"},
}

// addFieldLabelConversions tells the scheme which field selectors each
// served kind supports, so an unsupported one gets a 400 naming it.
func addFieldLabelConversions(s *runtime.Scheme) error {
	for _, g := range groups {
		for kind := range s.KnownTypes(g.gv) {
			gvk := g.gv.WithKind(kind)
			allowed := map[string]bool{"metadata.name": true, "metadata.namespace": true}
			for _, l := range FieldLabels[gvk] {
				allowed[l] = true
			}
			err := s.AddFieldLabelConversionFunc(gvk, func(label, value string) (string, string, error) {
				if allowed[label] {
					return label, value, nil
				}
				return "", "", fmt.Errorf("field label not supported: %s", label)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}
