package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// saPods run in namespace team: an in-cluster client (the real kubectl,
// a client-go program, started with no kubeconfig: it finds the
// ServiceAccount token, the CA and the API server's address in the pod)
// as a ServiceAccount bound to view, and as the default one, bound to
// nothing.
const saPods = `
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader-view, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: reader}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: team}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Pod
metadata: {name: reader, namespace: team}
spec:
  serviceAccountName: reader
  restartPolicy: Never
  containers: [{name: c, image: host, command: [KUBECTL, get, services, -o, name], env: [{name: HOME, value: /tmp}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: nobody, namespace: team}
spec:
  restartPolicy: Never
  containers: [{name: c, image: host, command: [KUBECTL, get, services, -o, name], env: [{name: HOME, value: /tmp}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: team}
spec:
  serviceAccountName: reader
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: host, command: [sleep, "3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: no-token, namespace: team}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: host, command: [sleep, "3600"]}]
`

// TestServiceAccountsAndRBAC: every namespace gets its default
// ServiceAccount and the CA; pods get a token bound to them, which an
// in-cluster client uses and which dies with the pod; what a
// ServiceAccount or a user may do is exactly what RBAC bindings grant,
// checked with kubectl 1.27 and 1.33 (can-i, whoami, create token).
func TestServiceAccountsAndRBAC(t *testing.T) {
	t.Parallel()
	c := up(t, 1)
	k := c.kubectl
	k.MustRun("", "create", "namespace", "team")
	caPEM, err := os.ReadFile(filepath.Join(c.home, c.name, "apiserver", "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	c.until("team's default ServiceAccount and kube-root-ca.crt", 30*time.Second, func() bool {
		_, _, e1 := k.Run("", "-n", "team", "get", "serviceaccount", "default")
		ca, _, e2 := k.Run("", "-n", "team", "get", "configmap", "kube-root-ca.crt", "-o", `jsonpath={.data.ca\.crt}`)
		return e1 == nil && e2 == nil && ca == string(caPEM)
	})
	k.MustRun("", "-n", "team", "delete", "configmap", "kube-root-ca.crt")
	c.until("kube-root-ca.crt recreated", 30*time.Second, func() bool {
		_, _, err := k.Run("", "-n", "team", "get", "configmap", "kube-root-ca.crt")
		return err == nil
	})

	t.Run("in-cluster client with the pod's token", func(t *testing.T) {
		c := c.in(t)
		k := c.kubectl
		k.MustRun(strings.ReplaceAll(saPods, "KUBECTL", framework.KubectlPath(t, "1.33")), "apply", "-f", "-")
		var phases string
		c.until("the client pods done", 90*time.Second, func() bool {
			phases, _, _ = k.Run("", "-n", "team", "get", "pods", "reader", "nobody", "-o", "jsonpath={.items[*].status.phase}")
			f := strings.Fields(phases)
			return len(f) == 2 && f[0] != "Pending" && f[0] != "Running" && f[1] != "Pending" && f[1] != "Running"
		})
		if logs := k.MustRun("", "-n", "team", "logs", "reader"); phases != "Succeeded Failed" || strings.TrimSpace(logs) != "service/web" {
			t.Errorf("the reader pod (%s) listed %q, want service/web", phases, logs)
		}
		if logs := k.MustRun("", "-n", "team", "logs", "nobody"); !strings.Contains(logs, `User "system:serviceaccount:team:default" cannot list resource "services"`) {
			t.Errorf("the default ServiceAccount was not refused:\n%s", logs)
		}
		c.until("the sleepers running", time.Minute, func() bool {
			out, _, _ := k.Run("", "-n", "team", "get", "pods", "sleeper", "no-token", "-o", "jsonpath={.items[*].status.phase}")
			return out == "Running Running"
		})
		dir := "/var/run/secrets/kubernetes.io/serviceaccount"
		if ns := k.MustRun("", "-n", "team", "exec", "sleeper", "--", "cat", dir+"/namespace"); ns != "team" {
			t.Errorf("namespace file = %q", ns)
		}
		if ca := k.MustRun("", "-n", "team", "exec", "sleeper", "--", "cat", dir+"/ca.crt"); ca != string(caPEM) {
			t.Errorf("ca.crt is not the cluster CA")
		}
		if errOut := k.MustFail("", "-n", "team", "exec", "no-token", "--", "ls", dir); !strings.Contains(errOut, "No such file") {
			t.Errorf("automountServiceAccountToken: false still mounted something: %s", errOut)
		}
		token := k.MustRun("", "-n", "team", "exec", "sleeper", "--", "cat", dir+"/token")
		withToken := c.tokenKubectl(t, "1.33", token)
		if out := withToken.MustRun("", "-n", "team", "get", "services", "-o", "name"); strings.TrimSpace(out) != "service/web" {
			t.Errorf("the pod's token listed %q", out)
		}
		k.MustRun("", "-n", "team", "delete", "pod", "sleeper", "--wait")
		var refusal string
		c.until("the token refused once its pod is gone", 30*time.Second, func() bool {
			_, errOut, err := withToken.Run("", "-n", "team", "get", "services")
			refusal = errOut
			return err != nil
		})
		if !strings.Contains(refusal, "You must be logged in to the server") {
			t.Errorf("the dead pod's token: %s", refusal)
		}
	})

	t.Run("kubectl create token, whoami, can-i, TokenReview", func(t *testing.T) {
		c := c.in(t)
		k := c.kubectl
		token := strings.TrimSpace(k.MustRun("", "-n", "team", "create", "token", "reader", "--duration", "15m"))
		sa := c.tokenKubectl(t, "1.33", token)
		if who := sa.MustRun("", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); who != "system:serviceaccount:team:reader" {
			t.Errorf("whoami = %q", who)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"list", "services", "-n", "team"}, "yes"},
			{[]string{"get", "secrets", "-n", "team"}, "no"},
			{[]string{"list", "services", "-n", "default"}, "no"},
		} {
			out, _, _ := sa.Run("", append([]string{"auth", "can-i"}, tc.args...)...)
			if strings.TrimSpace(out) != tc.want {
				t.Errorf("can-i %v = %q, want %s", tc.args, out, tc.want)
			}
		}
		review := fmt.Sprintf(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":%q}}`, token)
		if who := k.MustRun(review, "create", "-f", "-", "-o", "jsonpath={.status.user.username}"); who != "system:serviceaccount:team:reader" {
			t.Errorf("TokenReview says %q", who)
		}
		bad := fmt.Sprintf(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":%q}}`, token[:len(token)-4]+"AAAA")
		if ok := k.MustRun(bad, "create", "-f", "-", "-o", "jsonpath={.status.authenticated}"); ok == "true" {
			t.Error("TokenReview accepted a token with a broken signature")
		}
	})

	for _, v := range framework.KubectlVersions {
		t.Run("a user's RBAC with kubectl "+v, func(t *testing.T) {
			c := c.in(t)
			user := "alice-" + strings.ReplaceAll(v, ".", "-")
			group := "dev-" + strings.ReplaceAll(v, ".", "-")
			path, err := c.svcnet("kubeconfig", "--name", c.name, "--user", user, "--group", group)
			if err != nil {
				t.Fatalf("svcnet kubeconfig --user: %v\n%s", err, path)
			}
			alice := framework.NewKubectl(t, v, strings.TrimSpace(path))
			admin := framework.NewKubectl(t, v, k.Kubeconfig)
			if errOut := alice.MustFail("", "-n", "team", "get", "pods"); !strings.Contains(errOut, fmt.Sprintf(`User "%s" cannot list resource "pods"`, user)) {
				t.Errorf("an unbound user was not refused: %s", errOut)
			}
			admin.MustRun("", "-n", "team", "create", "rolebinding", group+"-edit", "--clusterrole=edit", "--group="+group)
			c.until("the binding in effect", 30*time.Second, func() bool {
				_, _, err := alice.Run("", "-n", "team", "get", "pods")
				return err == nil
			})
			alice.MustRun("", "-n", "team", "create", "configmap", user)
			alice.MustFail("", "-n", "default", "get", "pods")
			if out, _, _ := alice.Run("", "-n", "team", "auth", "can-i", "create", "deployments.apps"); strings.TrimSpace(out) != "yes" {
				t.Errorf("can-i create deployments = %q", out)
			}
			if out, _, _ := alice.Run("", "-n", "team", "auth", "can-i", "create", "rolebindings"); strings.TrimSpace(out) != "no" {
				t.Errorf("can-i create rolebindings = %q", out)
			}
			if out := alice.MustRun("", "-n", "team", "auth", "can-i", "--list"); !strings.Contains(out, "configmaps") {
				t.Errorf("can-i --list lacks configmaps:\n%s", out)
			}
			// An admin of the namespace may grant what they hold, not more.
			admin.MustRun("", "-n", "team", "create", "rolebinding", user+"-admin", "--clusterrole=admin", "--user="+user)
			c.until("the admin binding in effect", 30*time.Second, func() bool {
				_, _, err := alice.Run("", "-n", "team", "get", "roles")
				return err == nil
			})
			alice.MustRun("", "-n", "team", "create", "role", user+"-pods", "--verb=get,list", "--resource=pods")
			if errOut := alice.MustFail("", "-n", "team", "create", "role", user+"-nodes", "--verb=get", "--resource=nodes"); !strings.Contains(errOut, "attempting to grant RBAC permissions not currently held") {
				t.Errorf("escalation through a Role not refused: %s", errOut)
			}
			if errOut := alice.MustFail("", "-n", "team", "create", "rolebinding", user+"-root", "--clusterrole=cluster-admin", "--user="+user); !strings.Contains(errOut, "attempting to grant RBAC permissions not currently held") {
				t.Errorf("escalation through a binding not refused: %s", errOut)
			}
			admin.MustRun("", "-n", "team", "delete", "rolebinding", group+"-edit", user+"-admin")
			c.until("access gone with the bindings", 30*time.Second, func() bool {
				_, _, err := alice.Run("", "-n", "team", "get", "pods")
				return err != nil
			})
		})
	}
}

// tokenKubectl is kubectl with a kubeconfig that holds only a bearer
// token (and the server and its CA from the admin kubeconfig).
func (c *localCluster) tokenKubectl(t *testing.T, version, token string) *framework.Kubectl {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(c.kubectl.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cl := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = cl
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: strings.TrimSpace(token)}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "token.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return framework.NewKubectl(t, version, path)
}
