package review

import (
	"context"
	"errors"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

var jane = &user.DefaultInfo{Name: "jane", UID: "u-1", Groups: []string{"devs", "system:authenticated"},
	Extra: map[string][]string{"scopes": {"a", "b"}}}

func as(u user.Info, ns string) context.Context {
	ctx := request.WithNamespace(context.Background(), ns)
	if u != nil {
		ctx = request.WithUser(ctx, u)
	}
	return ctx
}

// causeFields are the fields an Invalid error names.
func causeFields(err error) []string {
	var fields []string
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	return fields
}

// refuse is an admission check that refuses everything with err.
func refuse(err error) rest.ValidateObjectFunc {
	return func(context.Context, runtime.Object) error { return err }
}

func TestSelfSubjectReview(t *testing.T) {
	denied := apierrors.NewForbidden(authenticationv1.Resource("selfsubjectreviews"), "", errors.New("no"))
	cases := []struct {
		name     string
		user     user.Info
		validate rest.ValidateObjectFunc
		check    func(error) bool
	}{
		{"jane", jane, nil, nil},
		{"no user", nil, nil, apierrors.IsBadRequest},
		{"refused by admission", jane, refuse(denied), apierrors.IsForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewSelfSubjectReview()
			in := &authenticationv1.SelfSubjectReview{}
			out, err := r.Create(as(tc.user, ""), in, tc.validate, &metav1.CreateOptions{})
			if registrytest.ExpectError(t, err, tc.check) {
				return
			}
			info := out.(*authenticationv1.SelfSubjectReview).Status.UserInfo
			if info.Username != "jane" || info.UID != "u-1" || !slices.Equal(info.Groups, jane.Groups) ||
				!slices.Equal([]string(info.Extra["scopes"]), []string{"a", "b"}) {
				t.Errorf("user info %+v", info)
			}
			if in.Status.UserInfo.Username != "" {
				t.Error("the request object was changed")
			}
		})
	}
	if r := NewSelfSubjectReview(); r.NamespaceScoped() || r.GetSingularName() != "selfsubjectreview" {
		t.Errorf("scope %v, singular %q", r.NamespaceScoped(), r.GetSingularName())
	}
}

// tokens authenticates "good" as jane, fails on "broken" and knows no
// other token. It records the audiences it was asked for.
type tokens struct {
	asked      []string
	respAuds   authenticator.Audiences
	authCalled bool
}

func (a *tokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	a.authCalled = true
	a.asked, _ = authenticator.AudiencesFrom(ctx)
	switch token {
	case "good":
		return &authenticator.Response{User: jane, Audiences: a.respAuds}, true, nil
	case "broken":
		return nil, false, errors.New("token signature is invalid")
	}
	return nil, false, nil
}

func TestTokenReview(t *testing.T) {
	api := authenticator.Audiences{"https://kubernetes.default.svc"}
	cases := []struct {
		name      string
		spec      authenticationv1.TokenReviewSpec
		respAuds  authenticator.Audiences
		want      authenticationv1.TokenReviewStatus
		wantAsked []string
		invalid   bool
	}{
		{"valid token", authenticationv1.TokenReviewSpec{Token: "good"}, nil,
			authenticationv1.TokenReviewStatus{Authenticated: true, User: userInfo(jane), Audiences: api}, api, false},
		{"audiences asked for", authenticationv1.TokenReviewSpec{Token: "good", Audiences: []string{"vault"}}, authenticator.Audiences{"vault"},
			authenticationv1.TokenReviewStatus{Authenticated: true, User: userInfo(jane), Audiences: []string{"vault"}}, []string{"vault"}, false},
		{"unknown token", authenticationv1.TokenReviewSpec{Token: "other"}, nil, authenticationv1.TokenReviewStatus{}, api, false},
		{"broken token", authenticationv1.TokenReviewSpec{Token: "broken"}, nil,
			authenticationv1.TokenReviewStatus{Error: "token signature is invalid"}, api, false},
		{"no token", authenticationv1.TokenReviewSpec{}, nil, authenticationv1.TokenReviewStatus{}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &tokens{respAuds: tc.respAuds}
			r := NewTokenReview(a, api)
			in := &authenticationv1.TokenReview{Spec: tc.spec,
				Status: authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "forged"}}}
			out, err := r.Create(as(jane, ""), in, nil, &metav1.CreateOptions{})
			if tc.invalid {
				// kube-apiserver answers 400 here, svcnet 422 on spec.token:
				// both refuse the review before authenticating anything.
				if !(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) || a.authCalled {
					t.Fatalf("error %v (authenticator called: %v), want a refusal", err, a.authCalled)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := out.(*authenticationv1.TokenReview).Status
			if st.Authenticated != tc.want.Authenticated || st.Error != tc.want.Error || st.User.Username != tc.want.User.Username ||
				!slices.Equal(st.User.Groups, tc.want.User.Groups) || !slices.Equal(st.Audiences, tc.want.Audiences) {
				t.Errorf("status %+v, want %+v", st, tc.want)
			}
			if !slices.Equal(a.asked, tc.wantAsked) {
				t.Errorf("authenticator asked for audiences %q, want %q", a.asked, tc.wantAsked)
			}
		})
	}
	t.Run("refused by admission", func(t *testing.T) {
		a := &tokens{}
		_, err := NewTokenReview(a, api).Create(as(jane, ""), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "good"}},
			refuse(apierrors.NewForbidden(authenticationv1.Resource("tokenreviews"), "", errors.New("no"))), &metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || a.authCalled {
			t.Errorf("error %v, authenticator called: %v", err, a.authCalled)
		}
	})
}

// authz allows jane to get pods (not their subresources) in default and /healthz, denies her
// secrets explicitly, and has no opinion otherwise. It records what it
// was asked.
type authz struct{ asked authorizer.Attributes }

func (z *authz) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	z.asked = a
	switch {
	case a.GetUser().GetName() != "jane":
		return authorizer.DecisionNoOpinion, "", nil
	case a.IsResourceRequest() && a.GetResource() == "pods" && a.GetSubresource() == "" && a.GetNamespace() == "default" && a.GetVerb() == "get":
		return authorizer.DecisionAllow, "RBAC: allowed by RoleBinding \"read/default\"", nil
	case a.IsResourceRequest() && a.GetResource() == "secrets":
		return authorizer.DecisionDeny, "secrets are off limits", nil
	case !a.IsResourceRequest() && a.GetPath() == "/healthz":
		return authorizer.DecisionAllow, "", nil
	case !a.IsResourceRequest() && a.GetPath() == "/broken":
		return authorizer.DecisionNoOpinion, "", errors.New("webhook unreachable")
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// anyField: an Invalid error on whichever field.
const anyField = "*"

func TestAccessReviews(t *testing.T) {
	getPods := &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "get", Resource: "pods", Name: "web-0"}
	getLogs := &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "get", Group: "", Version: "v1", Resource: "pods",
		Subresource: "log", Name: "web-0"}
	listSecrets := &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "list", Resource: "secrets"}
	healthz := &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}
	broken := &authorizationv1.NonResourceAttributes{Path: "/broken", Verb: "get"}
	asJane := authorizationv1.SubjectAccessReviewSpec{User: "jane", Groups: []string{"devs"}}
	spec := func(base authorizationv1.SubjectAccessReviewSpec, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewSpec {
		base.ResourceAttributes, base.NonResourceAttributes = res, nonRes
		return base
	}
	self := func(res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) runtime.Object {
		return &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: res, NonResourceAttributes: nonRes}}
	}
	sar := func(s authorizationv1.SubjectAccessReviewSpec) runtime.Object {
		return &authorizationv1.SubjectAccessReview{Spec: s}
	}
	local := func(s authorizationv1.SubjectAccessReviewSpec) runtime.Object {
		return &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Spec: s}
	}
	type kind int
	const (
		selfKind kind = iota
		sarKind
		localKind
	)
	cases := []struct {
		name    string
		kind    kind
		obj     runtime.Object
		ns      string // of the request
		caller  user.Info
		want    authorizationv1.SubjectAccessReviewStatus
		invalid string // the field of an Invalid error, or anyField
		bad     bool   // BadRequest
	}{
		{"may I get pods", selfKind, self(getPods, nil), "", jane,
			authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "RBAC: allowed by RoleBinding \"read/default\""}, "", false},
		{"may I list secrets", selfKind, self(listSecrets, nil), "", jane,
			authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "secrets are off limits"}, "", false},
		{"may I get /healthz", selfKind, self(nil, healthz), "", jane, authorizationv1.SubjectAccessReviewStatus{Allowed: true}, "", false},
		{"may I get /broken", selfKind, self(nil, broken), "", jane,
			authorizationv1.SubjectAccessReviewStatus{EvaluationError: "webhook unreachable"}, "", false},
		{"may I, anonymously", selfKind, self(getPods, nil), "", nil, authorizationv1.SubjectAccessReviewStatus{}, "", true},
		// kube-apiserver names spec.resourceAttributes and
		// spec.nonResourceAttributes here, svcnet spec.
		{"may I nothing", selfKind, self(nil, nil), "", jane, authorizationv1.SubjectAccessReviewStatus{}, anyField, false},
		{"may I both", selfKind, self(getPods, healthz), "", jane, authorizationv1.SubjectAccessReviewStatus{}, anyField, false},
		{"may jane get pod logs", sarKind, sar(spec(asJane, getLogs, nil)), "", nil,
			authorizationv1.SubjectAccessReviewStatus{}, "", false}, // logs are not pods: no opinion
		{"may jane get pods", sarKind, sar(spec(asJane, getPods, nil)), "", nil,
			authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "RBAC: allowed by RoleBinding \"read/default\""}, "", false},
		{"may joe get pods", sarKind, sar(spec(authorizationv1.SubjectAccessReviewSpec{User: "joe"}, getPods, nil)), "", jane,
			authorizationv1.SubjectAccessReviewStatus{}, "", false},
		{"may nobody get pods", sarKind, sar(spec(authorizationv1.SubjectAccessReviewSpec{}, getPods, nil)), "", jane,
			authorizationv1.SubjectAccessReviewStatus{}, "spec.user", false},
		{"may a group get pods", sarKind, sar(spec(authorizationv1.SubjectAccessReviewSpec{Groups: []string{"devs"}}, getPods, nil)), "", jane,
			authorizationv1.SubjectAccessReviewStatus{}, "", false},
		{"may jane, locally", localKind, local(spec(asJane, getPods, nil)), "default", nil,
			authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "RBAC: allowed by RoleBinding \"read/default\""}, "", false},
		{"may jane, in another namespace", localKind, local(spec(asJane, getPods, nil)), "kube-system", nil,
			authorizationv1.SubjectAccessReviewStatus{}, "spec.resourceAttributes.namespace", false},
		{"may jane get pods and /healthz, locally", localKind, local(spec(asJane, getPods, healthz)), "default", nil,
			authorizationv1.SubjectAccessReviewStatus{}, "spec.nonResourceAttributes", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			z := &authz{}
			var r *AccessReview
			switch tc.kind {
			case selfKind:
				r = NewSelfSubjectAccessReview(authorizer.AuthorizerFunc(z.Authorize))
			case sarKind:
				r = NewSubjectAccessReview(authorizer.AuthorizerFunc(z.Authorize))
			case localKind:
				r = NewLocalSubjectAccessReview(authorizer.AuthorizerFunc(z.Authorize))
			}
			out, err := r.Create(as(tc.caller, tc.ns), tc.obj, nil, &metav1.CreateOptions{})
			switch {
			case tc.invalid != "":
				if !apierrors.IsInvalid(err) || (tc.invalid != anyField && !slices.Equal(causeFields(err), []string{tc.invalid})) {
					t.Fatalf("error %v, want Invalid %s", err, tc.invalid)
				}
				if z.asked != nil {
					t.Error("an invalid review reached the authorizer")
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
			var st authorizationv1.SubjectAccessReviewStatus
			switch o := out.(type) {
			case *authorizationv1.SelfSubjectAccessReview:
				st = o.Status
			case *authorizationv1.SubjectAccessReview:
				st = o.Status
			case *authorizationv1.LocalSubjectAccessReview:
				st = o.Status
			}
			if st != tc.want {
				t.Errorf("status %+v, want %+v", st, tc.want)
			}
		})
	}
}

func TestAccessReviewAttributes(t *testing.T) {
	z := &authz{}
	res := &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Group: "apps", Version: "v1",
		Resource: "deployments", Subresource: "scale", Name: "web"}
	spec := authorizationv1.SubjectAccessReviewSpec{User: "jane", UID: "u-1", Groups: []string{"devs"},
		Extra: map[string]authorizationv1.ExtraValue{"scopes": {"a"}}, ResourceAttributes: res}
	if _, err := NewSubjectAccessReview(authorizer.AuthorizerFunc(z.Authorize)).Create(as(nil, ""), &authorizationv1.SubjectAccessReview{Spec: spec}, nil, nil); err != nil {
		t.Fatal(err)
	}
	a := z.asked
	if !a.IsResourceRequest() || a.GetVerb() != "create" || a.GetNamespace() != "default" || a.GetAPIGroup() != "apps" ||
		a.GetAPIVersion() != "v1" || a.GetResource() != "deployments" || a.GetSubresource() != "scale" || a.GetName() != "web" {
		t.Errorf("resource attributes %+v", a)
	}
	if u := a.GetUser(); u.GetName() != "jane" || u.GetUID() != "u-1" || !slices.Equal(u.GetGroups(), []string{"devs"}) ||
		!slices.Equal(u.GetExtra()["scopes"], []string{"a"}) {
		t.Errorf("user %+v", u)
	}

	spec = authorizationv1.SubjectAccessReviewSpec{User: "jane", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}
	if _, err := NewSubjectAccessReview(authorizer.AuthorizerFunc(z.Authorize)).Create(as(nil, ""), &authorizationv1.SubjectAccessReview{Spec: spec}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if a := z.asked; a.IsResourceRequest() || a.GetPath() != "/metrics" || a.GetVerb() != "get" {
		t.Errorf("non-resource attributes %+v", a)
	}

	// Admission runs after the shape is checked and before the authorizer.
	z.asked = nil
	denied := apierrors.NewForbidden(authorizationv1.Resource("subjectaccessreviews"), "", errors.New("no"))
	if _, err := NewSubjectAccessReview(authorizer.AuthorizerFunc(z.Authorize)).Create(as(nil, ""), &authorizationv1.SubjectAccessReview{Spec: spec}, refuse(denied), nil); !apierrors.IsForbidden(err) || z.asked != nil {
		t.Errorf("error %v, authorizer asked %v", err, z.asked)
	}
}

// rules answers jane's rules, or an error for namespace "broken".
type rules struct{ ns string }

func (r *rules) RulesFor(_ context.Context, u user.Info, ns string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
	r.ns = ns
	switch {
	case ns == "broken":
		return []authorizationv1.ResourceRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}, nil, true,
			errors.New("webhook unreachable")
	case u.GetName() == "jane":
		return []authorizationv1.ResourceRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
			[]authorizationv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}, false, nil
	}
	return nil, nil, false, nil
}

func TestSelfSubjectRulesReview(t *testing.T) {
	joe := &user.DefaultInfo{Name: "joe"}
	cases := []struct {
		name                   string
		ns                     string
		caller                 user.Info
		resRules, nonResRules  int
		incomplete             bool
		evaluationError        string
		invalid, badRequest    bool
		resolverAskedNamespace string
	}{
		{"jane", "default", jane, 1, 1, false, "", false, false, "default"},
		{"joe may do nothing", "default", joe, 0, 0, false, "", false, false, "default"},
		{"resolver error", "broken", jane, 1, 0, true, "webhook unreachable", false, false, "broken"},
		{"no namespace", "", jane, 0, 0, false, "", true, false, ""},
		{"no user", "default", nil, 0, 0, false, "", false, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rr := &rules{}
			in := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: tc.ns}}
			out, err := NewSelfSubjectRulesReview(rr).Create(as(tc.caller, ""), in, nil, &metav1.CreateOptions{})
			switch {
			case tc.invalid:
				// kube-apiserver answers 400 here, svcnet 422 on spec.namespace.
				if !(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
					t.Fatalf("error %v, want a refusal", err)
				}
			case tc.badRequest:
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("error %v, want BadRequest", err)
				}
			case err != nil:
				t.Fatal(err)
			default:
				st := out.(*authorizationv1.SelfSubjectRulesReview).Status
				// Empty lists, never null: kubectl auth can-i --list prints them.
				if st.ResourceRules == nil || st.NonResourceRules == nil || len(st.ResourceRules) != tc.resRules ||
					len(st.NonResourceRules) != tc.nonResRules || st.Incomplete != tc.incomplete || st.EvaluationError != tc.evaluationError {
					t.Errorf("status %+v", st)
				}
			}
			if rr.ns != tc.resolverAskedNamespace {
				t.Errorf("rules asked for namespace %q, want %q", rr.ns, tc.resolverAskedNamespace)
			}
		})
	}
}
