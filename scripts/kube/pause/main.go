// Command pause is the pod sandbox ("pause") container of the cluster that
// scripts/kube-up.sh brings up: it holds the pod's namespaces, reaps what is
// re-parented to it and exits 0 on SIGTERM or SIGINT. Nothing is pulled from
// a registry, so the cluster's containerd runs this one (rollcage/pause).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
