package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/svcnet/svcnet/internal/controllermanager"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestLeaderElection runs two controller managers: one leads and acts,
// the other stands by and takes over when the leader dies.
func TestLeaderElection(t *testing.T) {
	api := framework.StartAPIServer(t)
	client := api.Client()
	framework.StartHollowKubelet(t, client, "node-1", "node-2")
	start := func(id string) *framework.Process {
		return framework.StartControllerManager(t, api, func(o *controllermanager.Options) {
			o.LeaderElect, o.Identity = true, id
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 3*time.Second, 2*time.Second, 250*time.Millisecond
		})
	}
	replicas := map[string]*framework.Process{"cm-a": start("cm-a"), "cm-b": start("cm-b")}
	ctx := framework.Context(t, 2*time.Minute)
	holder := func(ctx context.Context) string {
		l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "svcnet-controller-manager", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var leader string
	until(t, "a leader", 20*time.Second, func(ctx context.Context) (bool, error) {
		leader = holder(ctx)
		return replicas[leader] != nil, nil
	})
	standby := map[string]string{"cm-a": "cm-b", "cm-b": "cm-a"}[leader]

	if _, err := client.AppsV1().Deployments("default").Create(ctx, deployment("le", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podCount := func(ctx context.Context) int {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=le"})
		if err != nil {
			return -1
		}
		return len(pods.Items)
	}
	until(t, "3 pods", 20*time.Second, func(ctx context.Context) (bool, error) { return podCount(ctx) == 3, nil })
	time.Sleep(time.Second)
	if n := podCount(ctx); n != 3 {
		t.Fatalf("%d pods: two replicas acted", n)
	}
	if strings.Contains(replicas[standby].Logs(), "controller manager leading") {
		t.Fatalf("standby %s also led:\n%s", standby, replicas[standby].Logs())
	}

	// The leader dies without releasing its lease; the standby takes over.
	replicas[leader].Kill()
	until(t, "the standby to lead", 20*time.Second, func(ctx context.Context) (bool, error) {
		return holder(ctx) == standby, nil
	})
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := client.AppsV1().Deployments("default").GetScale(ctx, "le", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = 5
		_, err = client.AppsV1().Deployments("default").UpdateScale(ctx, "le", s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	until(t, "5 pods under the new leader", 30*time.Second, func(ctx context.Context) (bool, error) { return podCount(ctx) == 5, nil })
}
