package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

// runPause is the pause process: it blocks until SIGTERM or SIGINT, reaping every child that exits
// meanwhile. As PID 1 of a pod that shares its PID namespace it inherits the orphans of every container,
// and their zombies would fill the process table if nobody waited for them.
func runPause(logger klog.Logger) {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	logger.Info("Pausing")
	for s := range sigs {
		if s != syscall.SIGCHLD {
			logger.Info("Stopping", "signal", s.String())
			return
		}
		reap()
	}
}

// reap waits for every child that has exited. SIGCHLD signals coalesce, so one signal may stand for many
// children: it loops until none is left to wait for.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}
