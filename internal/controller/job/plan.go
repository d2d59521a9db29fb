// Package job runs Jobs as kube-controller-manager's Job controller does:
// pods from the template until spec.completions of them succeeded (or,
// without completions, until one did), at most spec.parallelism at once;
// failed pods retried up to spec.backoffLimit; activeDeadlineSeconds,
// suspend, Indexed completion (one pod per index, JOB_COMPLETION_INDEX)
// and ttlSecondsAfterFinished. Plan is the pure core.
package job

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
)

// CompletionIndexAnnotation and its label give an Indexed Job's pod its index.
const CompletionIndexAnnotation = batchv1.JobCompletionIndexAnnotation

// Steps are what a sync does.
type Steps struct {
	Create []*corev1.Pod
	Delete []*corev1.Pod
	Status batchv1.JobStatus
	// Expired: the finished Job's TTL is over; delete it.
	Expired bool
	// RequeueAfter: look again then (a deadline or TTL), 0 for never.
	RequeueAfter time.Duration
}

func condition(s *batchv1.JobStatus, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

func setCondition(s *batchv1.JobStatus, t batchv1.JobConditionType, reason, msg string, now metav1.Time) {
	if c := condition(s, t); c != nil {
		if c.Status != corev1.ConditionTrue {
			c.Status, c.Reason, c.Message, c.LastTransitionTime, c.LastProbeTime = corev1.ConditionTrue, reason, msg, now, now
		}
		return
	}
	s.Conditions = append(s.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg,
		LastProbeTime: now, LastTransitionTime: now})
}

// Finished reports whether the Job is Complete or Failed.
func Finished(s *batchv1.JobStatus) bool {
	for _, t := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		if c := condition(s, t); c != nil && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func podIndex(p *corev1.Pod) int {
	n, err := strconv.Atoi(p.Annotations[CompletionIndexAnnotation])
	if err != nil {
		return -1
	}
	return n
}

// Plan decides a sync of job given its pods.
func Plan(job *batchv1.Job, pods []*corev1.Pod, now time.Time) Steps {
	st := Steps{Status: *job.Status.DeepCopy()}
	s := &st.Status
	mt := metav1.NewTime(now)
	indexed := job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion

	var active []*corev1.Pod
	var succeeded, failed int32
	var terminating int32
	doneIndex := map[int]bool{}
	activeIndex := map[int]bool{}
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded++
			doneIndex[podIndex(p)] = true
		case p.Status.Phase == corev1.PodFailed:
			failed++
		case p.DeletionTimestamp != nil:
			terminating++
		default:
			active = append(active, p)
			activeIndex[podIndex(p)] = true
		}
		// With restartPolicy OnFailure, container restarts are failures.
		for _, cs := range p.Status.ContainerStatuses {
			failed += cs.RestartCount
		}
	}
	if indexed {
		succeeded = 0
		for i := range doneIndex {
			if i >= 0 && i < int(ptr.Deref(job.Spec.Completions, 0)) {
				succeeded++
			}
		}
	}
	// Pods may be gone (deleted by hand, garbage collected): counts only grow.
	s.Succeeded, s.Failed = max(s.Succeeded, succeeded), max(s.Failed, failed)
	s.Active = int32(len(active))
	s.Terminating = &terminating
	var readyN int32
	for _, p := range active {
		if controller.PodReady(p) {
			readyN++
		}
	}
	s.Ready = &readyN
	if indexed {
		s.CompletedIndexes = formatIndexes(doneIndex, int(ptr.Deref(job.Spec.Completions, 0)))
	}

	if Finished(s) {
		st.Delete = active
		s.Active = 0
		if ttl := job.Spec.TTLSecondsAfterFinished; ttl != nil && s.CompletionTime != nil || ttl != nil && condition(s, batchv1.JobFailed) != nil {
			at := finishTime(s).Add(time.Duration(*ttl) * time.Second)
			if !now.Before(at) {
				st.Expired = true
			} else {
				st.RequeueAfter = at.Sub(now)
			}
		}
		return st
	}
	suspended := job.Spec.Suspend != nil && *job.Spec.Suspend
	if !suspended && s.StartTime == nil {
		s.StartTime = &mt
	}
	if suspended {
		setCondition(s, batchv1.JobSuspended, "JobSuspended", "Job suspended", mt)
		s.StartTime = nil
		st.Delete = active
		s.Active = 0
		return st
	}
	if c := condition(s, batchv1.JobSuspended); c != nil && c.Status == corev1.ConditionTrue {
		c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionFalse, "JobResumed", "Job resumed", mt
	}

	fail := func(reason, msg string) Steps {
		setCondition(s, batchv1.JobFailureTarget, reason, msg, mt)
		setCondition(s, batchv1.JobFailed, reason, msg, mt)
		st.Delete = active
		s.Active = 0
		if ttl := job.Spec.TTLSecondsAfterFinished; ttl != nil {
			st.RequeueAfter = time.Duration(*ttl)*time.Second + time.Millisecond
		}
		return st
	}
	if s.Failed > ptr.Deref(job.Spec.BackoffLimit, 6) {
		return fail("BackoffLimitExceeded", "Job has reached the specified backoff limit")
	}
	if d := job.Spec.ActiveDeadlineSeconds; d != nil && s.StartTime != nil {
		deadline := s.StartTime.Add(time.Duration(*d) * time.Second)
		if !now.Before(deadline) {
			return fail("DeadlineExceeded", "Job was active longer than specified deadline")
		}
		st.RequeueAfter = deadline.Sub(now)
	}

	completions := job.Spec.Completions
	complete := false
	switch {
	case completions != nil:
		complete = s.Succeeded >= *completions
	default:
		// Without completions: done once one pod succeeded and none runs.
		complete = s.Succeeded > 0 && len(active) == 0
	}
	if complete {
		setCondition(s, batchv1.JobSuccessCriteriaMet, "CompletionsReached", "Reached expected number of succeeded pods", mt)
		setCondition(s, batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods", mt)
		s.CompletionTime = &mt
		st.Delete = active
		s.Active = 0
		if ttl := job.Spec.TTLSecondsAfterFinished; ttl != nil {
			st.RequeueAfter = time.Duration(*ttl)*time.Second + time.Millisecond
		}
		return st
	}

	if completions == nil && s.Succeeded > 0 {
		return st // no new pods; the running ones finish on their own
	}
	parallelism := int(ptr.Deref(job.Spec.Parallelism, 1))
	want := parallelism
	if completions != nil {
		want = min(parallelism, int(*completions-s.Succeeded))
	}
	if terminating > 0 && (job.Spec.PodReplacementPolicy == nil || *job.Spec.PodReplacementPolicy == batchv1.Failed) {
		// Replacements wait for terminating pods to end.
		want = max(0, want-int(terminating))
	}
	switch {
	case len(active) > want:
		// Newest first: they did the least work.
		sort.Slice(active, func(i, j int) bool { return active[j].CreationTimestamp.Before(&active[i].CreationTimestamp) })
		st.Delete = active[:len(active)-want]
	case len(active) < want:
		if indexed {
			for i := 0; i < int(*completions) && len(st.Create) < want-len(active); i++ {
				if !doneIndex[i] && !activeIndex[i] {
					st.Create = append(st.Create, NewPod(job, i))
				}
			}
		} else {
			for range want - len(active) {
				st.Create = append(st.Create, NewPod(job, -1))
			}
		}
	}
	return st
}

func finishTime(s *batchv1.JobStatus) time.Time {
	if s.CompletionTime != nil {
		return s.CompletionTime.Time
	}
	if c := condition(s, batchv1.JobFailed); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// NewPod is a pod of the job (index -1 for NonIndexed).
func NewPod(job *batchv1.Job, index int) *corev1.Pod {
	t := job.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: job.Name + "-", Namespace: job.Namespace, Labels: t.Labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: t.Spec,
	}
	if index >= 0 {
		i := strconv.Itoa(index)
		pod.GenerateName = fmt.Sprintf("%s-%d-", job.Name, index)
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Annotations[CompletionIndexAnnotation] = i
		pod.Labels[batchv1.JobCompletionIndexAnnotation] = i
		if pod.Spec.Hostname == "" {
			pod.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, index)
		}
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for j := range cs {
				cs[j].Env = append(cs[j].Env, corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.annotations['%s']", CompletionIndexAnnotation)}}})
			}
		}
	}
	return pod
}

// formatIndexes is "0-2,4": the completed indexes, as Kubernetes writes them.
func formatIndexes(done map[int]bool, n int) string {
	var parts []string
	for i := 0; i < n; i++ {
		if !done[i] {
			continue
		}
		j := i
		for j+1 < n && done[j+1] {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(i))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", i, j))
		}
		i = j
	}
	return strings.Join(parts, ",")
}
