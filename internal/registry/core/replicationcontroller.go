package core

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
)

// ReplicationController describes core/v1 ReplicationControllers, the
// ReplicaSets' predecessors that old manifests (and Kubernetes' e2e suite)
// still use. Defaults (selector and labels from the template) are applied
// when the object is decoded.
var ReplicationController = &registry.Kind{
	Resource:   schema.GroupResource{Resource: "replicationcontrollers"},
	Singular:   "replicationcontroller",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &corev1.ReplicationController{} },
	NewList:    func() runtime.Object { return &corev1.ReplicationControllerList{} },
	ShortNames: []string{"rc"},
	Categories: []string{"all"},
	Status:     true,
	Generation: true,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		rc := obj.(*corev1.ReplicationController)
		errs := registry.ValidateMeta(rc, true, registry.DNS1123Domain)
		spec := field.NewPath("spec")
		if rc.Spec.MinReadySeconds < 0 {
			errs = append(errs, field.Invalid(spec.Child("minReadySeconds"), rc.Spec.MinReadySeconds, "must be greater than or equal to 0"))
		}
		switch {
		case rc.Spec.Template == nil && len(rc.Spec.Selector) == 0:
			return append(errs, field.Required(spec.Child("selector"), ""), field.Required(spec.Child("template"), ""))
		case rc.Spec.Template == nil:
			errs = append(errs, metav1validation.ValidateLabels(rc.Spec.Selector, spec.Child("selector"))...)
			return append(errs, field.Required(spec.Child("template"), ""))
		case len(rc.Spec.Selector) == 0:
			errs = append(errs, field.Required(spec.Child("selector"), ""))
			return append(errs, ValidatePodSpec(&rc.Spec.Template.Spec, spec.Child("template", "spec"))...)
		}
		return append(errs, ValidateTemplate(rc.Spec.Replicas, &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}, rc.Spec.Template, spec)...)
	},
	Fields: func(obj runtime.Object) fields.Set {
		return fields.Set{"status.replicas": fmt.Sprint(obj.(*corev1.ReplicationController).Status.Replicas)}
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Desired", Type: "integer", Description: "Replicas is the number of desired replicas."},
			{Name: "Current", Type: "integer", Description: "Replicas is the most recently observed number of replicas."},
			{Name: "Ready", Type: "integer", Description: "The number of ready replicas for this replication controller."},
			registry.AgeColumn,
			ContainersColumn, ImagesColumn,
			{Name: "Selector", Wide: true, Description: "Selector is a label query over pods that should match the replica count."},
		},
		Row: func(obj runtime.Object) []any {
			rc := obj.(*corev1.ReplicationController)
			var names, images string
			if rc.Spec.Template != nil {
				names, images = ContainerColumns(&rc.Spec.Template.Spec)
			}
			return []any{int64(ptr.Deref(rc.Spec.Replicas, 1)), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas),
				registry.CreationAge(rc), names, images, labels.Set(rc.Spec.Selector).String()}
		},
	},
}

// ValidateTemplate checks the replica count, selector and pod template of
// a workload (Deployment, ReplicaSet, StatefulSet, DaemonSet,
// ReplicationController), as kube-apiserver does.
func ValidateTemplate(reps *int32, sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if reps != nil && *reps < 0 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *reps, "must be greater than or equal to 0"))
	}
	if sel == nil {
		return append(errs, field.Required(spec.Child("selector"), ""))
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(spec.Child("selector"), sel, "empty selector is invalid for deployment"))
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err == nil && !selector.Empty() && !selector.Matches(labels.Set(tmpl.Labels)) {
		errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, metav1validation.ValidateLabels(tmpl.Labels, spec.Child("template", "metadata", "labels"))...)
	errs = append(errs, ValidatePodSpec(&tmpl.Spec, spec.Child("template", "spec"))...)
	if tmpl.Spec.RestartPolicy != "" && tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(spec.Child("template", "spec", "restartPolicy"), tmpl.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	// A workload's pods run for ever: a deadline would only kill them.
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(spec.Child("template", "spec", "activeDeadlineSeconds"),
			"activeDeadlineSeconds is not supported in the pod template of a workload"))
	}
	return errs
}

// ContainersColumn and ImagesColumn head the two cells ContainerColumns
// gives, in every workload's wide table.
var (
	ContainersColumn = registry.Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."}
	ImagesColumn     = registry.Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."}
)

// ContainerColumns are the Containers and Images cells of a workload's
// table.
func ContainerColumns(spec *corev1.PodSpec) (string, string) {
	var names, images []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
		images = append(images, c.Image)
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}
