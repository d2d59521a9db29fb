#!/usr/bin/env bash
# Regenerates the OpenAPI definitions of the served kinds from k8s.io/api.
set -euo pipefail
cd "$(dirname "$0")/.."
go tool openapi-gen \
	--output-dir internal/apiserver/openapi \
	--output-pkg github.com/svcnet/svcnet/internal/apiserver/openapi \
	--output-file zz_generated.openapi.go \
	--go-header-file hack/boilerplate.go.txt \
	--report-filename /dev/null \
	k8s.io/api/core/v1 k8s.io/api/apps/v1 k8s.io/api/discovery/v1 k8s.io/api/networking/v1 \
	k8s.io/api/coordination/v1 k8s.io/api/autoscaling/v1 k8s.io/api/rbac/v1 k8s.io/api/batch/v1 \
	k8s.io/api/authentication/v1 k8s.io/api/authorization/v1 k8s.io/api/scheduling/v1alpha3 \
	k8s.io/metrics/pkg/apis/metrics/v1beta1 \
	k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime \
	k8s.io/apimachinery/pkg/util/intstr k8s.io/apimachinery/pkg/api/resource \
	k8s.io/apimachinery/pkg/version
