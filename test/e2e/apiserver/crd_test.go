package apiserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// crontabs is the CustomResourceDefinition of Kubernetes' own
// documentation, with a schema, a default, printer columns and a short name.
// Its group, GROUP, is the test's own on the shared server (UniqueName):
// CRDs are cluster-scoped, and one deleted by a run of the test may still
// be going when the next run (-count) creates its own.
const crontabs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.GROUP}
spec:
  group: GROUP
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string, description: "When the job runs, in cron syntax."}
              image: {type: string}
              replicas: {type: integer, minimum: 1, default: 1}
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
`

// TestCustomResources: a CRD manifest applies with kubectl 1.27 and 1.33;
// its schema is explained; its objects are created (defaulted, validated
// by the schema), listed with the CRD's columns, watched, and go with the
// CRD.
func TestCustomResources(t *testing.T) {
	s := framework.SharedAPIServer(t)
	group := framework.UniqueName("e2e-crd") + ".example.com"
	admin := framework.NewKubectl(t, "1.33", s.Kubeconfig)
	admin.MustRun(strings.ReplaceAll(crontabs, "GROUP", group), "apply", "-f", "-")
	// Should the test stop early: another kind CronTab would make the
	// short names of a later run's ambiguous.
	t.Cleanup(func() { _, _, _ = admin.Run("", "delete", "crd", "crontabs."+group, "--ignore-not-found") })
	admin.MustRun("", "wait", "--for=condition=Established", "crd/crontabs."+group, "--timeout=30s")
	for _, version := range framework.KubectlVersions {
		t.Run(version, func(t *testing.T) {
			k := framework.NewKubectl(t, version, s.Kubeconfig)
			ns := framework.UniqueName("e2e-crd-" + strings.ReplaceAll(version, ".", "-"))
			k.MustRun("", "create", "namespace", ns)
			n := []string{"-n", ns}
			// Discovery may lag the Established condition by a moment.
			err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				_, _, err := k.Run("", append(n, "get", "crontabs")...)
				return err == nil, nil
			})
			if err != nil {
				t.Fatalf("kubectl %s never found crontabs: %s", version, k.MustFail("", append(n, "get", "crontabs")...))
			}

			// The schema is in the served OpenAPI documents (v3 for kubectl
			// 1.27 and later's explain), written a moment after the CRD.
			err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				out, _, err := k.Run("", "explain", "crontab.spec.cronSpec")
				return err == nil && strings.Contains(out, "When the job runs, in cron syntax."), nil
			})
			if err != nil {
				out, errOut, _ := k.Run("", "explain", "crontab.spec.cronSpec")
				t.Errorf("kubectl explain of the custom resource: %s %s", out, errOut)
			}

			stopWatch := k.Watch(append(n, "ct")...)
			k.MustRun("apiVersion: "+group+"/v1\nkind: CronTab\nmetadata: {name: nightly}\nspec: {cronSpec: '0 3 * * *', image: backup}\n",
				append(n, "apply", "-f", "-")...)
			if got := k.MustRun("", append(n, "get", "crontab", "nightly", "-o", "jsonpath={.spec.replicas}")...); got != "1" {
				t.Errorf("the schema's default: replicas = %q", got)
			}
			if out := k.MustRun("", append(n, "get", "ct")...); !strings.Contains(out, "SPEC") || !strings.Contains(out, "0 3 * * *") {
				t.Errorf("printer columns:\n%s", out)
			}
			errOut := k.MustFail("apiVersion: "+group+"/v1\nkind: CronTab\nmetadata: {name: bad}\nspec: {replicas: 0}\n", append(n, "apply", "-f", "-")...)
			if !strings.Contains(errOut, "spec.replicas") || !strings.Contains(errOut, "should be greater than or equal to 1") {
				t.Errorf("schema validation: %s", errOut)
			}
			k.MustRun("", append(n, "delete", "crontab", "nightly")...)
			watchOut := stopWatch()
			for _, want := range []string{"ADDED", "nightly", "DELETED"} {
				if !strings.Contains(watchOut, want) {
					t.Errorf("watch: want %q in\n%s", want, watchOut)
				}
			}
			k.MustRun("apiVersion: "+group+"/v1\nkind: CronTab\nmetadata: {name: weekly}\nspec: {cronSpec: '0 3 * * 0'}\n", append(n, "apply", "-f", "-")...)
		})
	}
	admin.MustRun("", "delete", "crd", "crontabs."+group)
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, errOut, err := admin.Run("", "get", "crontabs."+group, "-A")
		return err != nil && strings.Contains(errOut, "the server doesn't have a resource type"), nil
	})
	if err != nil {
		t.Error("crontabs still served after their CRD was deleted")
	}
}
