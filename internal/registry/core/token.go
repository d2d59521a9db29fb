package core

import (
	"context"
	"fmt"
	"math"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/svcnet/svcnet/internal/satoken"
)

// Getter reads one object of a kind (from the watch cache).
type Getter func(ctx context.Context, namespace, name string) (runtime.Object, error)

// TokenREST is serviceaccounts/token: TokenRequest, which issues a token
// of the ServiceAccount, optionally bound to a Pod, Secret or Node (the
// token then dies with that object).
type TokenREST struct {
	Signer                *satoken.Signer
	Audiences             []string
	ServiceAccounts, Pods Getter
	Secrets, Nodes        Getter
	// NodeOf names the node a requester is (node agents may only ask
	// for tokens bound to the pods they run, as NodeRestriction has it).
	NodeOf func(user.Info) (string, bool)
	Now    func() time.Time
}

func (r *TokenREST) New() runtime.Object     { return &authenticationv1.TokenRequest{} }
func (r *TokenREST) Destroy()                {}
func (r *TokenREST) NamespaceScoped() bool   { return true }
func (r *TokenREST) GetSingularName() string { return "token" }

// GroupVersionKind implements rest.GroupVersionKindProvider: the
// subresource of a core kind speaks authentication.k8s.io.
func (r *TokenREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
}

var _ rest.NamedCreater = (*TokenREST)(nil)

// minTokenLifetime is Kubernetes' floor.
const minTokenLifetime = 10 * time.Minute

// Create issues the token.
func (r *TokenREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req := obj.(*authenticationv1.TokenRequest).DeepCopy()
	ns, _ := request.NamespaceFrom(ctx)
	invalid := func(errs ...*field.Error) error {
		return apierrors.NewInvalid(schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}, name, errs)
	}
	if req.Spec.ExpirationSeconds == nil {
		req.Spec.ExpirationSeconds = new(int64)
		*req.Spec.ExpirationSeconds = 3600
	}
	life := time.Duration(*req.Spec.ExpirationSeconds) * time.Second
	switch {
	case life < minTokenLifetime:
		return nil, invalid(field.Invalid(field.NewPath("spec", "expirationSeconds"), *req.Spec.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
	case *req.Spec.ExpirationSeconds > math.MaxUint32:
		return nil, invalid(field.TooLong(field.NewPath("spec", "expirationSeconds"), *req.Spec.ExpirationSeconds, math.MaxUint32))
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = r.Audiences
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	saObj, err := r.ServiceAccounts(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	sa := saObj.(*corev1.ServiceAccount)
	tok := satoken.Token{Namespace: ns, ServiceAccount: satoken.Ref{Name: sa.Name, UID: string(sa.UID)},
		Audiences: req.Spec.Audiences, Lifetime: life}

	u, _ := request.UserFrom(ctx)
	node, isNode := "", false
	if u != nil && r.NodeOf != nil {
		node, isNode = r.NodeOf(u)
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		bound, err := r.bound(ctx, ns, ref)
		if err != nil {
			return nil, err
		}
		switch o := bound.(type) {
		case *corev1.Pod:
			if o.Spec.ServiceAccountName != sa.Name {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind a token of ServiceAccount %q to Pod %q, which runs as %q", sa.Name, o.Name, o.Spec.ServiceAccountName))
			}
			if isNode && o.Spec.NodeName != node {
				return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, name, fmt.Errorf("node %q may only ask for tokens bound to its own pods", node))
			}
			tok.Pod = &satoken.Ref{Name: o.Name, UID: string(o.UID)}
			if o.Spec.NodeName != "" {
				if n, err := r.Nodes(ctx, "", o.Spec.NodeName); err == nil {
					tok.Node = &satoken.Ref{Name: o.Spec.NodeName, UID: string(n.(*corev1.Node).UID)}
				}
			}
		case *corev1.Secret:
			tok.Secret = &satoken.Ref{Name: o.Name, UID: string(o.UID)}
		case *corev1.Node:
			tok.Node = &satoken.Ref{Name: o.Name, UID: string(o.UID)}
		}
	}
	if isNode && tok.Pod == nil {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, name, fmt.Errorf("node %q may only ask for tokens bound to its own pods", node))
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	signed, exp, err := r.Signer.Sign(tok, now)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	req.Status = authenticationv1.TokenRequestStatus{Token: signed, ExpirationTimestamp: metav1.NewTime(exp)}
	return req, nil
}

// bound finds the object a token is to be bound to and checks its UID.
func (r *TokenREST) bound(ctx context.Context, ns string, ref *authenticationv1.BoundObjectReference) (runtime.Object, error) {
	p := field.NewPath("spec", "boundObjectRef")
	var get Getter
	var getNS = ns
	switch {
	case ref.Kind == "Pod" && (ref.APIVersion == "v1" || ref.APIVersion == ""):
		get = r.Pods
	case ref.Kind == "Secret" && (ref.APIVersion == "v1" || ref.APIVersion == ""):
		get = r.Secrets
	case ref.Kind == "Node" && (ref.APIVersion == "v1" || ref.APIVersion == ""):
		get, getNS = r.Nodes, ""
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: cannot bind a token to %s %s", p, ref.APIVersion, ref.Kind))
	}
	if ref.Name == "" {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}, "",
			field.ErrorList{field.Required(p.Child("name"), "")})
	}
	obj, err := get(ctx, getNS, ref.Name)
	if err != nil {
		return nil, err
	}
	m := obj.(metav1.Object)
	if ref.UID != "" && ref.UID != m.GetUID() {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "serviceaccounts"}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the %s's (%s)", ref.UID, ref.Kind, m.GetUID()))
	}
	return obj, nil
}
