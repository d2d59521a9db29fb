package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/registry/core"
	"github.com/svcnet/svcnet/internal/satoken"
)

// saTokens authenticates ServiceAccount tokens: the signature, the time
// window and the audience, then that the ServiceAccount and the object
// the token is bound to still exist with the same UIDs (a token dies
// with its pod), as kube-apiserver's service-account authenticator.
type saTokens struct {
	signer *satoken.Signer
	// Set once the storage is built (authentication is configured first).
	serviceAccounts, pods, secrets, nodes core.Getter
}

var _ authenticator.Token = (*saTokens)(nil)

func (a *saTokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	auds, _ := authenticator.AudiencesFrom(ctx)
	c, err := a.signer.Verify(token, auds, time.Now())
	if errors.Is(err, satoken.ErrNotOurs) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if a.serviceAccounts == nil {
		return nil, false, errors.New("ServiceAccount tokens are not accepted yet: the server is starting")
	}
	k := c.Kubernetes
	saObj, err := a.serviceAccounts(ctx, k.Namespace, k.ServiceAccount.Name)
	if err != nil {
		return nil, false, fmt.Errorf("ServiceAccount %s/%s: %w", k.Namespace, k.ServiceAccount.Name, err)
	}
	if uid := string(saObj.(*corev1.ServiceAccount).UID); uid != k.ServiceAccount.UID {
		return nil, false, fmt.Errorf("ServiceAccount UID (%s) does not match the token's (%s)", uid, k.ServiceAccount.UID)
	}
	extra := map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=" + c.ID}}
	if k.Pod != nil {
		obj, err := a.pods(ctx, k.Namespace, k.Pod.Name)
		if err != nil {
			return nil, false, fmt.Errorf("the token's pod %s/%s: %w", k.Namespace, k.Pod.Name, err)
		}
		pod := obj.(*corev1.Pod)
		if string(pod.UID) != k.Pod.UID {
			return nil, false, fmt.Errorf("pod %s/%s was recreated: the token was for UID %s", k.Namespace, k.Pod.Name, k.Pod.UID)
		}
		if pod.DeletionTimestamp != nil && pod.DeletionTimestamp.Time.Before(time.Now()) {
			return nil, false, fmt.Errorf("pod %s/%s is gone", k.Namespace, k.Pod.Name)
		}
		extra["authentication.kubernetes.io/pod-name"] = []string{k.Pod.Name}
		extra["authentication.kubernetes.io/pod-uid"] = []string{k.Pod.UID}
	}
	if k.Secret != nil {
		obj, err := a.secrets(ctx, k.Namespace, k.Secret.Name)
		if err != nil {
			return nil, false, fmt.Errorf("the token's secret %s/%s: %w", k.Namespace, k.Secret.Name, err)
		}
		if uid := string(obj.(*corev1.Secret).UID); uid != k.Secret.UID {
			return nil, false, fmt.Errorf("secret %s/%s was recreated", k.Namespace, k.Secret.Name)
		}
	}
	if k.Node != nil {
		extra["authentication.kubernetes.io/node-name"] = []string{k.Node.Name}
		extra["authentication.kubernetes.io/node-uid"] = []string{k.Node.UID}
		// A token bound to a node itself dies with it; one bound to a
		// pod names its node for information only.
		if k.Pod == nil {
			obj, err := a.nodes(ctx, "", k.Node.Name)
			if err != nil {
				return nil, false, fmt.Errorf("the token's node %s: %w", k.Node.Name, err)
			}
			if uid := string(obj.(*corev1.Node).UID); uid != k.Node.UID {
				return nil, false, fmt.Errorf("node %s was recreated", k.Node.Name)
			}
		}
	}
	resp := &authenticator.Response{
		User: &user.DefaultInfo{
			Name:   serviceaccount.MakeUsername(k.Namespace, k.ServiceAccount.Name),
			UID:    k.ServiceAccount.UID,
			Groups: serviceaccount.MakeGroupNames(k.Namespace),
			Extra:  extra,
		},
	}
	for _, a := range c.Audience {
		if len(auds) == 0 || slices.Contains(auds, a) {
			resp.Audiences = append(resp.Audiences, a)
		}
	}
	return resp, true, nil
}
