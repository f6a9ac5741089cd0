//go:build tools

// Package kube pins the Kubernetes commands scripts/kube-up.sh builds.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
