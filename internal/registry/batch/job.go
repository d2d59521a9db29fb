// Package batch is the registry of batch/v1 Jobs.
package batch

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/core"
)

// The labels that tie a Job's pods to it (both the current and the
// legacy keys, as Kubernetes sets them).
const (
	ControllerUIDLabel       = batchv1.ControllerUidLabel // batch.kubernetes.io/controller-uid
	JobNameLabel             = batchv1.JobNameLabel       // batch.kubernetes.io/job-name
	legacyControllerUIDLabel = "controller-uid"
	legacyJobNameLabel       = "job-name"
)

// generateSelector ties the template to the Job by its UID, unless the
// user manages the selector (spec.manualSelector).
func generateSelector(j *batchv1.Job) {
	if j.Spec.ManualSelector != nil && *j.Spec.ManualSelector {
		return
	}
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	uid := string(j.UID)
	for k, v := range map[string]string{ControllerUIDLabel: uid, legacyControllerUIDLabel: uid, JobNameLabel: j.Name, legacyJobNameLabel: j.Name} {
		j.Spec.Template.Labels[k] = v
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{ControllerUIDLabel: uid}}
	}
}

// Job describes batch/v1 Jobs.
var Job = &registry.Kind{
	Resource:   schema.GroupResource{Group: "batch", Resource: "jobs"},
	Singular:   "job",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &batchv1.Job{} },
	NewList:    func() runtime.Object { return &batchv1.JobList{} },
	Categories: []string{"all"},
	Status:     true,
	Generation: true,
	PrepareForCreate: func(_ context.Context, obj runtime.Object) {
		generateSelector(obj.(*batchv1.Job))
	},
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		j := obj.(*batchv1.Job)
		errs := registry.ValidateMeta(j, true, registry.DNS1123Domain)
		spec := field.NewPath("spec")
		for name, v := range map[string]*int32{"parallelism": j.Spec.Parallelism, "completions": j.Spec.Completions, "backoffLimit": j.Spec.BackoffLimit} {
			if v != nil && *v < 0 {
				errs = append(errs, field.Invalid(spec.Child(name), *v, "must be greater than or equal to 0"))
			}
		}
		if d := j.Spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
			errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *d, "must be greater than 0"))
		}
		if t := j.Spec.TTLSecondsAfterFinished; t != nil && *t < 0 {
			errs = append(errs, field.Invalid(spec.Child("ttlSecondsAfterFinished"), *t, "must be greater than or equal to 0"))
		}
		if m := j.Spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
			errs = append(errs, field.NotSupported(spec.Child("completionMode"), *m, []string{string(batchv1.NonIndexedCompletion), string(batchv1.IndexedCompletion)}))
		}
		if m := j.Spec.CompletionMode; m != nil && *m == batchv1.IndexedCompletion && j.Spec.Completions == nil {
			errs = append(errs, field.Required(spec.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
		}
		if j.Spec.PodFailurePolicy != nil || j.Spec.SuccessPolicy != nil || j.Spec.BackoffLimitPerIndex != nil {
			errs = append(errs, field.Forbidden(spec, "podFailurePolicy, successPolicy and backoffLimitPerIndex are not supported by svcnet's Job controller"))
		}
		if j.Spec.Selector == nil {
			errs = append(errs, field.Required(spec.Child("selector"), ""))
		} else {
			errs = append(errs, metav1validation.ValidateLabelSelector(j.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
			if sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil && !sel.Matches(labels.Set(j.Spec.Template.Labels)) {
				errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), j.Spec.Template.Labels, "`selector` does not match template `labels`"))
			}
		}
		errs = append(errs, core.ValidatePodSpec(&j.Spec.Template.Spec, spec.Child("template", "spec"))...)
		if p := j.Spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyOnFailure && p != corev1.RestartPolicyNever {
			errs = append(errs, field.NotSupported(spec.Child("template", "spec", "restartPolicy"), p, []string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
		}
		return errs
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		j, o := obj.(*batchv1.Job), old.(*batchv1.Job)
		var errs field.ErrorList
		spec := field.NewPath("spec")
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(j.Spec.Selector, o.Spec.Selector, spec.Child("selector"))...)
		// The template is not printed in the error: it is long.
		if !apiequality.Semantic.DeepEqual(j.Spec.Template, o.Spec.Template) {
			errs = append(errs, field.Invalid(spec.Child("template"), "", apimachineryvalidation.FieldImmutableErrorMsg))
		}
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(j.Spec.Completions, o.Spec.Completions, spec.Child("completions"))...)
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(j.Spec.CompletionMode, o.Spec.CompletionMode, spec.Child("completionMode"))...)
		return errs
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Status", Description: "Status of the job."},
			{Name: "Completions", Description: "The desired number of successfully finished pods the job should be run with."},
			{Name: "Duration", Description: "Time required to complete the job."},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			j := obj.(*batchv1.Job)
			completions := fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, derefOr(j.Spec.Parallelism, 1))
			if j.Spec.Completions != nil {
				completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
			}
			dur := ""
			if s := j.Status.StartTime; s != nil {
				end := time.Now()
				if c := j.Status.CompletionTime; c != nil {
					end = c.Time
				}
				dur = duration.HumanDuration(end.Sub(s.Time))
			}
			return []any{jobStatus(j), completions, dur, registry.CreationAge(j)}
		},
	},
}

func derefOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

// jobStatus is kubectl's STATUS column.
func jobStatus(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return "Complete"
		case batchv1.JobFailed:
			return "Failed"
		case batchv1.JobSuspended:
			return "Suspended"
		}
	}
	return "Running"
}
