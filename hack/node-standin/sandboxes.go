package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// sandboxes gives pods a network namespace plugged by the CNI plugin and a server process, and takes them
// away again. Calls for one pod never overlap (the work queue hands a key to one worker at a time).
type sandboxes struct {
	store store
	cni   *cniRuntime
	// self is this binary, run with the serve subcommand.
	self string
}

// add makes a new sandbox in the pod's network namespace through CNI ADD, like a kubelet: every attempt is a
// new sandbox, and a failed one is deleted.
func (s *sandboxes) add(ctx context.Context, pod *corev1.Pod, sb *sandbox, netnsPath string) error {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	sb.ID = newSandboxID()
	if err := s.store.save(sb); err != nil {
		return err
	}
	ip, err := s.cni.add(ctx, sb, netnsPath)
	if err != nil {
		if derr := s.cni.del(ctx, sb, netnsPath); derr != nil {
			logger.Error(derr, "DEL after a failed ADD")
		}
		return fmt.Errorf("CNI ADD for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	sb.Ready, sb.IP = true, ip
	if err := s.store.save(sb); err != nil {
		return err
	}
	logger.V(1).Info("Pod sandbox ready", "sandbox", sb.ID, "ip", ip)
	return nil
}

// ensure makes the pod's sandbox ready and returns its IP. An error means "try again later".
func (s *sandboxes) ensure(ctx context.Context, pod *corev1.Pod) (string, error) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	entered := time.Now()
	name := netnsName(pod.Namespace, pod.Name)
	sb, err := s.store.load(name)
	if err != nil {
		return "", err
	}
	if sb != nil && sb.UID != string(pod.UID) {
		logger.V(1).Info("Removing the sandbox of a former pod of that name", "formerUID", sb.UID)
		if err := s.remove(ctx, sb); err != nil {
			return "", err
		}
		sb = nil
	}
	if sb == nil {
		// The state file comes first: it marks the namespace as the stand-in's.
		sb = &sandbox{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Netns: name, IfName: podIfName}
		if err := s.store.save(sb); err != nil {
			return "", err
		}
	}
	start := time.Now()
	netnsPath, err := createNetns(sb.Netns)
	if err != nil {
		return "", err
	}
	netnsDone := time.Now()
	added := !sb.Ready
	if added {
		if err := s.add(ctx, pod, sb, netnsPath); err != nil {
			return "", err
		}
	}
	addDone := time.Now()
	if err := s.serve(ctx, pod, sb, netnsPath); err != nil {
		return "", err
	}
	if added {
		logger.Info("Pod sandbox up", "state", start.Sub(entered), "netns", netnsDone.Sub(start), "cniAdd", addDone.Sub(netnsDone),
			"server", time.Since(addDone), "sinceCreated", time.Since(pod.CreationTimestamp.Time))
	}
	return sb.IP, nil
}

// serve keeps the pod's server running, or stopped while ServingAnnotation says "false".
func (s *sandboxes) serve(ctx context.Context, pod *corev1.Pod, sb *sandbox, netnsPath string) error {
	if pod.Annotations[ServingAnnotation] == "false" {
		if serverAlive(sb.PID, sb.ID) {
			klog.FromContext(ctx).V(1).Info("Stopping the pod's server", "pod", klog.KObj(pod), "annotation", ServingAnnotation)
			stopServer(sb.PID, sb.ID)
		}
		return nil
	}
	p := podPorts(pod)
	if p.empty() || serverAlive(sb.PID, sb.ID) {
		return nil
	}
	pid, wait, err := startServer(s.self, filepath.Join(s.store.dir, sb.Netns+".log"), serveArgs(sb, netnsPath, p))
	if err != nil {
		return err
	}
	go wait()
	sb.PID = pid
	return s.store.save(sb)
}

// removeByName removes the sandbox of namespace/name, if the stand-in has one.
func (s *sandboxes) removeByName(ctx context.Context, namespace, name string) error {
	sb, err := s.store.load(netnsName(namespace, name))
	if err != nil || sb == nil {
		return err
	}
	return s.remove(ctx, sb)
}

// remove runs DEL, stops the server, deletes the namespace and forgets the sandbox.
func (s *sandboxes) remove(ctx context.Context, sb *sandbox) error {
	netnsPath := filepath.Join(netnsDir, sb.Netns)
	if sb.ID != "" {
		if err := s.cni.del(ctx, sb, netnsPath); err != nil {
			return fmt.Errorf("CNI DEL for pod %s/%s: %w", sb.Namespace, sb.Name, err)
		}
	}
	stopServer(sb.PID, sb.ID)
	if err := removeNetns(sb.Netns); err != nil {
		return err
	}
	return s.store.remove(sb.Netns)
}

// cleanup runs at start: GC through the plugin with the attachments of pods that still exist, then the
// removal of every sandbox of a pod that is gone. live maps namespace/name to the UID of the pods bound
// to the node.
func (s *sandboxes) cleanup(ctx context.Context, live map[string]string) error {
	logger := klog.FromContext(ctx)
	all, err := s.store.list()
	if err != nil {
		return err
	}
	var valid []types.GCAttachment
	var stale []*sandbox
	for _, sb := range all {
		if live[sb.Namespace+"/"+sb.Name] == sb.UID {
			if sb.ID != "" {
				valid = append(valid, types.GCAttachment{ContainerID: sb.ID, IfName: sb.IfName})
			}
			continue
		}
		stale = append(stale, sb)
	}
	if err := s.cni.gc(ctx, valid); err != nil {
		logger.Error(err, "CNI GC failed; removing stale sandboxes one by one")
	}
	var errs []error
	for _, sb := range stale {
		if err := s.remove(ctx, sb); err != nil {
			errs = append(errs, err)
			continue
		}
		logger.Info("Removed the sandbox of a pod that is gone", "pod", klog.KRef(sb.Namespace, sb.Name))
	}
	return errors.Join(errs...)
}
