// The pod sandbox's process (k8s.gcr.io/pause cannot be pulled without a registry): it holds the pod's
// namespaces as PID 1, reaps the zombies re-parented to it and exits 0 when asked to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

func main() {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGCHLD, syscall.SIGINT, syscall.SIGTERM)
	for received := range signals {
		if received == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}
