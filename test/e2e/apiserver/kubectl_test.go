package apiserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

const manifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: svcnet/hostnames
        ports: [{containerPort: 9376}]
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: NodePort
  selector: {app: web}
  ports:
  - {name: http, port: PORT, targetPort: 9376}
`

// TestKubectl drives the oldest and the newest installed kubectl through a
// user's daily commands, with their default flags.
func TestKubectl(t *testing.T) {
	s := framework.SharedAPIServer(t)
	for _, version := range framework.KubectlVersions {
		t.Run(version, func(t *testing.T) {
			k := framework.NewKubectl(t, version, s.Kubeconfig)
			// Created and deleted with kubectl, as a user would.
			ns := framework.UniqueName("e2e-kubectl-" + strings.ReplaceAll(version, ".", "-"))
			k.MustRun("", "create", "namespace", ns)
			k.Kubeconfig = s.Kubeconfig
			n := []string{"-n", ns}

			// apply creates, then a changed manifest reconfigures in place.
			out := k.MustRun(strings.ReplaceAll(manifest, "PORT", "80"), append(n, "apply", "-f", "-")...)
			for _, want := range []string{"deployment.apps/web created", "service/web created"} {
				if !strings.Contains(out, want) {
					t.Errorf("apply: want %q in %q", want, out)
				}
			}
			before := getService(t, k, ns, "web")
			out = k.MustRun(strings.ReplaceAll(manifest, "PORT", "81"), append(n, "apply", "-f", "-")...)
			if !strings.Contains(out, "service/web configured") || !strings.Contains(out, "deployment.apps/web unchanged") {
				t.Errorf("re-apply: got %q", out)
			}
			after := getService(t, k, ns, "web")
			if after.Spec.Ports[0].Port != 81 {
				t.Errorf("re-apply: port %d, want 81", after.Spec.Ports[0].Port)
			}
			if after.Spec.ClusterIP != before.Spec.ClusterIP || after.Spec.Ports[0].NodePort != before.Spec.Ports[0].NodePort {
				t.Errorf("re-apply changed allocations: %s/%d -> %s/%d", before.Spec.ClusterIP, before.Spec.Ports[0].NodePort,
					after.Spec.ClusterIP, after.Spec.Ports[0].NodePort)
			}

			// get: plain and wide tables with kube-apiserver's columns.
			out = k.MustRun("", append(n, "get", "services")...)
			assertHeader(t, out, "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE")
			if !regexp.MustCompile(`web\s+NodePort\s+` + regexp.QuoteMeta(after.Spec.ClusterIP) + `\s+<none>\s+81:\d+/TCP`).MatchString(out) {
				t.Errorf("get services: row of web not as expected:\n%s", out)
			}
			out = k.MustRun("", append(n, "get", "services", "-o", "wide")...)
			assertHeader(t, out, "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR")
			if !strings.Contains(out, "app=web") {
				t.Errorf("get -o wide: no selector column value:\n%s", out)
			}
			out = k.MustRun("", append(n, "get", "deployments")...)
			assertHeader(t, out, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
			if !regexp.MustCompile(`web\s+0/3\s+0\s+0`).MatchString(out) {
				t.Errorf("get deployments:\n%s", out)
			}
			if out := k.MustRun("", append(n, "get", "service", "web", "-o", "yaml")...); !strings.Contains(out, "clusterIP: "+after.Spec.ClusterIP) {
				t.Errorf("get -o yaml:\n%s", out)
			}

			// describe.
			out = k.MustRun("", append(n, "describe", "service", "web")...)
			for _, want := range []string{"Selector:", "app=web", "NodePort:", "http  81/TCP", "TargetPort:", "9376/TCP"} {
				if !strings.Contains(out, want) {
					t.Errorf("describe: want %q in\n%s", want, out)
				}
			}

			// label, annotate.
			k.MustRun("", append(n, "label", "service", "web", "tier=front")...)
			k.MustRun("", append(n, "annotate", "service", "web", "owner=team-a")...)
			svc := getService(t, k, ns, "web")
			if svc.Labels["tier"] != "front" || svc.Annotations["owner"] != "team-a" {
				t.Errorf("label/annotate: labels %v annotations %v", svc.Labels, svc.Annotations)
			}

			// edit through KUBE_EDITOR.
			editor := filepath.Join(t.TempDir(), "editor.sh")
			if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/tier: front/tier: back/' \"$1\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			k.Env = []string{"KUBE_EDITOR=" + editor}
			k.MustRun("", append(n, "edit", "service", "web")...)
			k.Env = nil
			if svc := getService(t, k, ns, "web"); svc.Labels["tier"] != "back" {
				t.Errorf("edit: label tier=%q, want back", svc.Labels["tier"])
			}

			// scale through the scale subresource.
			k.MustRun("", append(n, "scale", "deployment", "web", "--replicas=5")...)
			out = k.MustRun("", append(n, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas} {.metadata.generation}")...)
			if out != "5 2" {
				t.Errorf("scale: replicas and generation %q, want \"5 2\"", out)
			}

			// patch: strategic merge, merge and JSON patch.
			k.MustRun("", append(n, "patch", "service", "web", "-p", `{"spec":{"sessionAffinity":"ClientIP"}}`)...)
			k.MustRun("", append(n, "patch", "service", "web", "--type=merge", "-p", `{"metadata":{"labels":{"patched":"merge"}}}`)...)
			k.MustRun("", append(n, "patch", "service", "web", "--type=json", "-p", `[{"op":"replace","path":"/spec/ports/0/port","value":82}]`)...)
			svc = getService(t, k, ns, "web")
			if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || svc.Labels["patched"] != "merge" || svc.Spec.Ports[0].Port != 82 {
				t.Errorf("patch: affinity %s labels %v port %d", svc.Spec.SessionAffinity, svc.Labels, svc.Spec.Ports[0].Port)
			}
			if c := svc.Spec.SessionAffinityConfig; c == nil || c.ClientIP == nil || *c.ClientIP.TimeoutSeconds != 10800 {
				t.Errorf("patch: ClientIP affinity not defaulted: %+v", c)
			}

			// get -w sees a change as it happens.
			stopWatch := k.Watch(append(n, "services")...)
			k.MustRun("", append(n, "create", "service", "clusterip", "watched", "--tcp=80")...)
			k.MustRun("", append(n, "delete", "service", "watched")...)
			watchOut := stopWatch()
			for _, want := range []string{"ADDED", "watched", "DELETED"} {
				if !strings.Contains(watchOut, want) {
					t.Errorf("get -w: want %q in\n%s", want, watchOut)
				}
			}

			// kubectl's own errors for invalid manifests.
			errOut := k.MustFail("apiVersion: v1\nkind: Service\nmetadata: {name: Bad_Name}\nspec:\n  ports: [{port: 80}, {port: 80}]\n", append(n, "apply", "-f", "-")...)
			for _, want := range []string{`The Service "Bad_Name" is invalid`, "metadata.name: Invalid value", `Duplicate value: "80/TCP"`} {
				if !strings.Contains(errOut, want) {
					t.Errorf("invalid service: want %q in %q", want, errOut)
				}
			}
			errOut = k.MustFail("apiVersion: v1\nkind: Service\nmetadata: {name: s2}\nspec:\n  portz: [{port: 80}]\n", append(n, "apply", "-f", "-")...)
			// The server's strict field validation says `unknown field
			// "spec.portz"`; kubectl validates on its own side, from the
			// OpenAPI document, when it cannot tell that the server does
			// (while the server is still starting): either refusal will do.
			if !strings.Contains(errOut, `unknown field "spec.portz"`) && !strings.Contains(errOut, `unknown field "portz"`) {
				t.Errorf("unknown field: got %q", errOut)
			}
			errOut = k.MustFail("apiVersion: v1\nkind: Service\nmetadata: {name: s3\n", append(n, "apply", "-f", "-")...)
			if !strings.Contains(errOut, "error") {
				t.Errorf("malformed YAML: got %q", errOut)
			}
			errOut = k.MustFail("apiVersion: v1\nkind: Frobnicator\nmetadata: {name: f}\n", append(n, "apply", "-f", "-")...)
			if !strings.Contains(errOut, `no matches for kind "Frobnicator" in version "v1"`) {
				t.Errorf("unknown kind: got %q", errOut)
			}
			errOut = k.MustFail("", append(n, "create", "service", "clusterip", "taken", "--tcp=80", "--clusterip="+after.Spec.ClusterIP)...)
			if !strings.Contains(errOut, "already allocated") {
				t.Errorf("taken cluster IP: got %q", errOut)
			}

			// delete, and the namespace with it.
			k.MustRun(strings.ReplaceAll(manifest, "PORT", "82"), append(n, "delete", "-f", "-")...)
			if out, _, _ := k.Run("", append(n, "get", "service", "web")...); out != "" {
				t.Errorf("service still there after delete: %s", out)
			}
			k.MustRun("", "delete", "namespace", ns)
		})
	}
}

func getService(t *testing.T, k *framework.Kubectl, ns, name string) *corev1.Service {
	t.Helper()
	var svc corev1.Service
	if err := json.Unmarshal([]byte(k.MustRun("", "-n", ns, "get", "service", name, "-o", "json")), &svc); err != nil {
		t.Fatalf("get -o json: %v", err)
	}
	return &svc
}

func assertHeader(t *testing.T, table string, cols ...string) {
	t.Helper()
	header := strings.Fields(strings.SplitN(table, "\n", 2)[0])
	if strings.Join(header, " ") != strings.Join(cols, " ") {
		t.Errorf("table header %v, want %v", header, cols)
	}
}
