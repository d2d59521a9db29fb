package core

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
	"github.com/svcnet/svcnet/internal/satoken"
)

const issuer = "https://kubernetes.default.svc.cluster.local"

// getter serves objects by namespace/name, as the watch cache would.
func getter(objs ...runtime.Object) Getter {
	return func(_ context.Context, ns, name string) (runtime.Object, error) {
		for _, o := range objs {
			if m := o.(metav1.Object); m.GetNamespace() == ns && m.GetName() == name {
				return o.DeepCopyObject(), nil
			}
		}
		return nil, apierrors.NewNotFound(corev1.Resource("objects"), name)
	}
}

func tokenREST(t *testing.T) *TokenREST {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := satoken.NewSigner(key, issuer)
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name, uid, sa, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, UID: types.UID(uid)},
			Spec: corev1.PodSpec{ServiceAccountName: sa, NodeName: node}}
	}
	return &TokenREST{
		Signer:          signer,
		Audiences:       []string{issuer},
		ServiceAccounts: getter(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "builder", UID: "sa-1"}}),
		Pods: getter(pod("job-1", "pod-1", "builder", "node-1"), pod("other", "pod-2", "default", "node-1"),
			pod("elsewhere", "pod-3", "builder", "node-2"), pod("unscheduled", "pod-4", "builder", "")),
		Secrets: getter(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "s1", UID: "sec-1"}}),
		Nodes: getter(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "n-1"}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", UID: "n-2"}}),
		NodeOf: func(u user.Info) (string, bool) {
			return strings.CutPrefix(u.GetName(), "system:node:")
		},
		Now: func() time.Time { return time.Unix(1_800_000_000, 0) },
	}
}

func TestTokenRequest(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ref := func(kind, name, uid string) *authenticationv1.BoundObjectReference {
		return &authenticationv1.BoundObjectReference{Kind: kind, APIVersion: "v1", Name: name, UID: types.UID(uid)}
	}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}
	kubelet := &user.DefaultInfo{Name: "system:node:node-1", Groups: []string{"system:nodes"}}
	refused := apierrors.NewForbidden(corev1.Resource("serviceaccounts"), "builder", errors.New("no"))
	cases := []struct {
		name      string
		sa        string
		spec      authenticationv1.TokenRequestSpec
		requester user.Info
		validate  rest.ValidateObjectFunc
		check     func(error) bool // the error wanted; nil for none
		life      time.Duration
		audiences []string
		pod, node string // bound objects, as name/uid
		secret    string
	}{
		{"default", "builder", authenticationv1.TokenRequestSpec{}, admin, nil, nil, time.Hour, []string{issuer}, "", "", ""},
		{"ten minutes", "builder", authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}, admin, nil, nil,
			10 * time.Minute, []string{issuer}, "", "", ""},
		{"less than ten minutes", "builder", authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](599)}, admin, nil,
			apierrors.IsInvalid, 0, nil, "", "", ""},
		{"more than 2^32 seconds", "builder", authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](1<<32 + 1)}, admin, nil,
			apierrors.IsInvalid, 0, nil, "", "", ""},
		{"audiences", "builder", authenticationv1.TokenRequestSpec{Audiences: []string{"vault", "sts.example.com"}}, admin, nil, nil,
			time.Hour, []string{"vault", "sts.example.com"}, "", "", ""},
		{"no such service account", "deployer", authenticationv1.TokenRequestSpec{}, admin, nil, apierrors.IsNotFound, 0, nil, "", "", ""},
		{"refused by admission", "builder", authenticationv1.TokenRequestSpec{}, admin, func(context.Context, runtime.Object) error { return refused },
			apierrors.IsForbidden, 0, nil, "", "", ""},
		{"bound to a pod", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Pod", "job-1", "pod-1")}, admin, nil, nil,
			time.Hour, []string{issuer}, "job-1/pod-1", "node-1/n-1", ""},
		{"bound to a pod by name", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Pod", "job-1", "")}, admin, nil, nil,
			time.Hour, []string{issuer}, "job-1/pod-1", "node-1/n-1", ""},
		{"bound to an unscheduled pod", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Pod", "unscheduled", "")}, admin, nil, nil,
			time.Hour, []string{issuer}, "unscheduled/pod-4", "", ""},
		{"bound to another pod's UID", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Pod", "job-1", "pod-9")}, admin, nil,
			apierrors.IsConflict, 0, nil, "", "", ""},
		{"bound to a pod of another service account", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Pod", "other", "")}, admin, nil,
			apierrors.IsBadRequest, 0, nil, "", "", ""},
		{"bound to a missing pod", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Pod", "gone", "")}, admin, nil,
			apierrors.IsNotFound, 0, nil, "", "", ""},
		{"bound to a secret", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Secret", "s1", "sec-1")}, admin, nil, nil,
			time.Hour, []string{issuer}, "", "", "s1/sec-1"},
		{"bound to a node", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Node", "node-2", "")}, admin, nil, nil,
			time.Hour, []string{issuer}, "", "node-2/n-2", ""},
		{"bound to a deployment", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Deployment", APIVersion: "apps/v1", Name: "web"}}, admin, nil, apierrors.IsBadRequest, 0, nil, "", "", ""},
		{"bound to a pod of another group", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "example.com/v1", Name: "job-1"}}, admin, nil, apierrors.IsBadRequest, 0, nil, "", "", ""},
		{"bound to nothing by name", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Pod", "", "")}, admin, nil,
			apierrors.IsInvalid, 0, nil, "", "", ""},
		{"kubelet, for its pod", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Pod", "job-1", "pod-1")}, kubelet, nil, nil,
			time.Hour, []string{issuer}, "job-1/pod-1", "node-1/n-1", ""},
		{"kubelet, for another node's pod", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Pod", "elsewhere", "")}, kubelet, nil,
			apierrors.IsForbidden, 0, nil, "", "", ""},
		{"kubelet, unbound", "builder", authenticationv1.TokenRequestSpec{}, kubelet, nil, apierrors.IsForbidden, 0, nil, "", "", ""},
		{"kubelet, bound to a secret", "builder", authenticationv1.TokenRequestSpec{BoundObjectRef: ref("Secret", "s1", "")}, kubelet, nil,
			apierrors.IsForbidden, 0, nil, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tokenREST(t)
			ctx := genericapirequest.WithUser(genericapirequest.WithNamespace(context.Background(), "ci"), tc.requester)
			in := &authenticationv1.TokenRequest{Spec: tc.spec}
			before := in.DeepCopy()
			out, err := r.Create(ctx, tc.sa, in, tc.validate, &metav1.CreateOptions{})
			if registrytest.ExpectError(t, err, tc.check) {
				return
			}
			if !apiequality.Semantic.DeepEqual(in, before) {
				t.Error("the request object was changed")
			}
			tr := out.(*authenticationv1.TokenRequest)
			if got := *tr.Spec.ExpirationSeconds; got != int64(tc.life/time.Second) {
				t.Errorf("spec.expirationSeconds %d, want %d", got, int64(tc.life/time.Second))
			}
			if !slices.Equal(tr.Spec.Audiences, tc.audiences) {
				t.Errorf("spec.audiences %q, want %q", tr.Spec.Audiences, tc.audiences)
			}
			if !tr.Status.ExpirationTimestamp.Time.Equal(now.Add(tc.life)) {
				t.Errorf("expires %v, want %v", tr.Status.ExpirationTimestamp, now.Add(tc.life))
			}
			c, err := r.Signer.Verify(tr.Status.Token, tc.audiences, now.Add(time.Minute))
			if err != nil {
				t.Fatalf("token does not verify: %v", err)
			}
			if c.Subject != "system:serviceaccount:ci:builder" || c.Kubernetes.Namespace != "ci" ||
				c.Kubernetes.ServiceAccount != (satoken.Ref{Name: "builder", UID: "sa-1"}) || !c.ExpiresAt.Time.Equal(now.Add(tc.life)) {
				t.Errorf("claims %+v", c)
			}
			refOf := func(r *satoken.Ref) string {
				if r == nil {
					return ""
				}
				return r.Name + "/" + r.UID
			}
			if got := refOf(c.Kubernetes.Pod); got != tc.pod {
				t.Errorf("bound to pod %q, want %q", got, tc.pod)
			}
			if got := refOf(c.Kubernetes.Node); got != tc.node {
				t.Errorf("bound to node %q, want %q", got, tc.node)
			}
			if got := refOf(c.Kubernetes.Secret); got != tc.secret {
				t.Errorf("bound to secret %q, want %q", got, tc.secret)
			}
		})
	}
}
