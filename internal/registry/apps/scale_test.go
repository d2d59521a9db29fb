package apps

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"
)

// scalable returns each kind the scale subresource serves, with 4
// replicas wanted, 3 running and selector app=web.
func scalable() map[string]runtime.Object {
	m := metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", ResourceVersion: "17"}
	return map[string]runtime.Object{
		"deployment": &appsv1.Deployment{ObjectMeta: m,
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Selector: webSelector()},
			Status: appsv1.DeploymentStatus{Replicas: 3}},
		"replicaset": &appsv1.ReplicaSet{ObjectMeta: m,
			Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4), Selector: webSelector()},
			Status: appsv1.ReplicaSetStatus{Replicas: 3}},
		"statefulset": &appsv1.StatefulSet{ObjectMeta: m,
			Spec:   appsv1.StatefulSetSpec{Replicas: ptr.To[int32](4), Selector: webSelector()},
			Status: appsv1.StatefulSetStatus{Replicas: 3}},
		"replicationcontroller": &corev1.ReplicationController{ObjectMeta: m,
			Spec:   corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](4), Selector: map[string]string{"app": "web"}},
			Status: corev1.ReplicationControllerStatus{Replicas: 3}},
	}
}

func TestScaleOf(t *testing.T) {
	for kind, obj := range scalable() {
		t.Run(kind, func(t *testing.T) {
			s, err := scaleOf(obj)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != "web" || s.Namespace != "default" || s.UID != "uid-1" || s.ResourceVersion != "17" {
				t.Errorf("scale metadata %+v", s.ObjectMeta)
			}
			if s.Spec.Replicas != 4 || s.Status.Replicas != 3 || s.Status.Selector != "app=web" {
				t.Errorf("scale spec %+v, status %+v", s.Spec, s.Status)
			}
		})
	}
	if _, err := scaleOf(&appsv1.DaemonSet{}); err == nil {
		t.Error("a DaemonSet has a scale")
	}
}

func TestScaleUpdatedObject(t *testing.T) {
	setReplicas := func(n int32, rv string) rest.UpdatedObjectInfo {
		return rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, old runtime.Object) (runtime.Object, error) {
			s := old.(*autoscalingv1.Scale).DeepCopy()
			s.Spec.Replicas, s.ResourceVersion = n, rv
			return s, nil
		})
	}
	cases := []struct {
		name     string
		req      rest.UpdatedObjectInfo
		replicas int32  // wanted replicas after the update
		rv       string // resourceVersion of the updated workload
		invalid  bool
		bad      bool
	}{
		{"scale up", setReplicas(6, "17"), 6, "17", false, false},
		{"scale to zero", setReplicas(0, "17"), 0, "17", false, false},
		{"no resourceVersion: unconditional", setReplicas(2, ""), 2, "17", false, false},
		{"resourceVersion: a precondition", setReplicas(2, "16"), 2, "16", false, false},
		{"negative", setReplicas(-1, "17"), 0, "", true, false},
		{"not a Scale", rest.DefaultUpdatedObjectInfo(&appsv1.Deployment{}), 0, "", false, true},
	}
	for kind := range scalable() {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				old := scalable()[kind]
				before := old.DeepCopyObject()
				out, err := (&scaleUpdate{name: "web", req: tc.req}).UpdatedObject(context.Background(), old)
				switch {
				case tc.invalid:
					if !apierrors.IsInvalid(err) {
						t.Fatalf("error %v, want Invalid", err)
					}
					causes := err.(apierrors.APIStatus).Status().Details.Causes
					if len(causes) != 1 || causes[0].Field != "spec.replicas" {
						t.Errorf("causes %+v", causes)
					}
					return
				case tc.bad:
					if !apierrors.IsBadRequest(err) {
						t.Fatalf("error %v, want BadRequest", err)
					}
					return
				case err != nil:
					t.Fatal(err)
				}
				want, sel, status := replicasOf(out)
				m, _ := metaOf(out)
				if *want != tc.replicas || m.ResourceVersion != tc.rv || status != 3 || sel.MatchLabels["app"] != "web" {
					t.Errorf("updated to %d replicas (rv %s, status %d, selector %v), want %d (rv %s)", *want, m.ResourceVersion, status, sel, tc.replicas, tc.rv)
				}
				if b, _, _ := replicasOf(before); *b != 4 {
					t.Fatal("test setup")
				}
				if o, _, _ := replicasOf(old); *o != 4 {
					t.Errorf("the stored object was changed: %d replicas", *o)
				}
			})
		}
	}
}
