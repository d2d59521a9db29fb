// Package review serves the create-only review kinds: who am I
// (SelfSubjectReview), may I or may they (SelfSubjectAccessReview,
// SubjectAccessReview, LocalSubjectAccessReview), what may I
// (SelfSubjectRulesReview), and whose token is this (TokenReview). They
// are answered, never stored. kubectl auth can-i and kubectl auth whoami
// use them.
package review

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// RuleResolver lists what a user may do in a namespace.
type RuleResolver interface {
	RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error)
}

// base is what every review endpoint shares.
type base struct {
	newObj     func() runtime.Object
	singular   string
	namespaced bool
}

func (b base) New() runtime.Object     { return b.newObj() }
func (b base) Destroy()                {}
func (b base) NamespaceScoped() bool   { return b.namespaced }
func (b base) GetSingularName() string { return b.singular }
func (b base) validate(ctx context.Context, obj runtime.Object, v rest.ValidateObjectFunc) error {
	if v == nil {
		return nil
	}
	return v(ctx, obj)
}

func requester(ctx context.Context) (user.Info, error) {
	u, ok := request.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user in the request")
	}
	return u, nil
}

// SelfSubjectReview answers who the requester is.
type SelfSubjectReview struct{ base }

// NewSelfSubjectReview serves selfsubjectreviews.
func NewSelfSubjectReview() *SelfSubjectReview {
	return &SelfSubjectReview{base{func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }, "selfsubjectreview", false}}
}

// Create implements rest.Creater.
func (r *SelfSubjectReview) Create(ctx context.Context, obj runtime.Object, v rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	if err := r.validate(ctx, obj, v); err != nil {
		return nil, err
	}
	u, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	out := obj.(*authenticationv1.SelfSubjectReview).DeepCopy()
	out.Status.UserInfo = userInfo(u)
	return out, nil
}

func userInfo(u user.Info) authenticationv1.UserInfo {
	info := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	for k, v := range u.GetExtra() {
		if info.Extra == nil {
			info.Extra = map[string]authenticationv1.ExtraValue{}
		}
		info.Extra[k] = v
	}
	return info
}

// TokenReview answers whose a bearer token is.
type TokenReview struct {
	base
	Tokens    authenticator.Token
	Audiences authenticator.Audiences
}

// NewTokenReview serves tokenreviews with the server's token authenticator.
func NewTokenReview(tokens authenticator.Token, audiences authenticator.Audiences) *TokenReview {
	return &TokenReview{base: base{func() runtime.Object { return &authenticationv1.TokenReview{} }, "tokenreview", false},
		Tokens: tokens, Audiences: audiences}
}

// Create implements rest.Creater.
func (r *TokenReview) Create(ctx context.Context, obj runtime.Object, v rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	tr := obj.(*authenticationv1.TokenReview).DeepCopy()
	if tr.Spec.Token == "" {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenReview"}, "",
			field.ErrorList{field.Required(field.NewPath("spec", "token"), "")})
	}
	if err := r.validate(ctx, obj, v); err != nil {
		return nil, err
	}
	auds := r.Audiences
	if len(tr.Spec.Audiences) > 0 {
		auds = tr.Spec.Audiences
	}
	resp, ok, err := r.Tokens.AuthenticateToken(authenticator.WithAudiences(ctx, auds), tr.Spec.Token)
	tr.Status = authenticationv1.TokenReviewStatus{}
	switch {
	case err != nil:
		tr.Status.Error = err.Error()
	case ok:
		tr.Status.Authenticated = true
		tr.Status.User = userInfo(resp.User)
		tr.Status.Audiences = resp.Audiences
		if len(tr.Status.Audiences) == 0 {
			tr.Status.Audiences = auds
		}
	}
	return tr, nil
}

// AccessReview answers SubjectAccessReviews of the three kinds.
type AccessReview struct {
	base
	Authorizer authorizer.Authorizer
	kind       string
}

// NewSubjectAccessReview serves subjectaccessreviews (any user, asked by
// someone allowed to ask).
func NewSubjectAccessReview(z authorizer.Authorizer) *AccessReview {
	return &AccessReview{base{func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }, "subjectaccessreview", false}, z, "SubjectAccessReview"}
}

// NewLocalSubjectAccessReview serves localsubjectaccessreviews, the
// namespaced SubjectAccessReview.
func NewLocalSubjectAccessReview(z authorizer.Authorizer) *AccessReview {
	return &AccessReview{base{func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }, "localsubjectaccessreview", true}, z, "LocalSubjectAccessReview"}
}

// NewSelfSubjectAccessReview serves selfsubjectaccessreviews (may I?).
func NewSelfSubjectAccessReview(z authorizer.Authorizer) *AccessReview {
	return &AccessReview{base{func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }, "selfsubjectaccessreview", false}, z, "SelfSubjectAccessReview"}
}

// Create implements rest.Creater.
func (r *AccessReview) Create(ctx context.Context, obj runtime.Object, v rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	var u user.Info
	var res *authorizationv1.ResourceAttributes
	var nonRes *authorizationv1.NonResourceAttributes
	var status *authorizationv1.SubjectAccessReviewStatus
	switch o := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		me, err := requester(ctx)
		if err != nil {
			return nil, err
		}
		u, res, nonRes, status = me, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, &o.Status
	case *authorizationv1.SubjectAccessReview:
		u, res, nonRes, status = specUser(o.Spec), o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, &o.Status
		if o.Spec.User == "" && len(o.Spec.Groups) == 0 {
			return nil, r.invalid(field.Required(field.NewPath("spec", "user"), "at least one of user or group must be specified"))
		}
	case *authorizationv1.LocalSubjectAccessReview:
		u, res, nonRes, status = specUser(o.Spec), o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, &o.Status
		ns, _ := request.NamespaceFrom(ctx)
		if res == nil || res.Namespace != ns {
			return nil, r.invalid(field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), "", "must match the namespace of the request: "+ns))
		}
		if nonRes != nil {
			return nil, r.invalid(field.Invalid(field.NewPath("spec", "nonResourceAttributes"), "", "disallowed on this kind of request"))
		}
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a %s: %T", r.kind, obj))
	}
	if (res == nil) == (nonRes == nil) {
		return nil, r.invalid(field.Invalid(field.NewPath("spec"), "", "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if err := r.validate(ctx, obj, v); err != nil {
		return nil, err
	}
	attrs := authorizer.AttributesRecord{User: u}
	if res != nil {
		attrs.Verb, attrs.Namespace, attrs.APIGroup, attrs.APIVersion = res.Verb, res.Namespace, res.Group, res.Version
		attrs.Resource, attrs.Subresource, attrs.Name, attrs.ResourceRequest = res.Resource, res.Subresource, res.Name, true
	} else {
		attrs.Verb, attrs.Path = nonRes.Verb, nonRes.Path
	}
	d, reason, err := r.Authorizer.Authorize(ctx, attrs)
	*status = authorizationv1.SubjectAccessReviewStatus{
		Allowed: d == authorizer.DecisionAllow, Denied: d == authorizer.DecisionDeny, Reason: reason,
	}
	if err != nil {
		status.EvaluationError = err.Error()
	}
	return obj, nil
}

func (r *AccessReview) invalid(e *field.Error) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName, Kind: r.kind}, "", field.ErrorList{e})
}

func specUser(s authorizationv1.SubjectAccessReviewSpec) user.Info {
	u := &user.DefaultInfo{Name: s.User, UID: s.UID, Groups: s.Groups}
	for k, v := range s.Extra {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = v
	}
	return u
}

// RulesReview answers SelfSubjectRulesReviews (kubectl auth can-i --list).
type RulesReview struct {
	base
	Rules RuleResolver
}

// NewSelfSubjectRulesReview serves selfsubjectrulesreviews.
func NewSelfSubjectRulesReview(r RuleResolver) *RulesReview {
	return &RulesReview{base{func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }, "selfsubjectrulesreview", false}, r}
}

// Create implements rest.Creater.
func (r *RulesReview) Create(ctx context.Context, obj runtime.Object, v rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	o := obj.(*authorizationv1.SelfSubjectRulesReview).DeepCopy()
	if o.Spec.Namespace == "" {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName, Kind: "SelfSubjectRulesReview"}, "",
			field.ErrorList{field.Required(field.NewPath("spec", "namespace"), "")})
	}
	if err := r.validate(ctx, obj, v); err != nil {
		return nil, err
	}
	u, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	resRules, nonRes, incomplete, err := r.Rules.RulesFor(ctx, u, o.Spec.Namespace)
	o.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: resRules, NonResourceRules: nonRes, Incomplete: incomplete}
	if err != nil {
		o.Status.EvaluationError = err.Error()
	}
	if o.Status.ResourceRules == nil {
		o.Status.ResourceRules = []authorizationv1.ResourceRule{}
	}
	if o.Status.NonResourceRules == nil {
		o.Status.NonResourceRules = []authorizationv1.NonResourceRule{}
	}
	return o, nil
}
