// hollow: kubemark's hollow kubelet (the real kubelet code with a fake container runtime,
// fake mounter and stub container manager) for many nodes on one machine. Unlike the
// stock kubemark binary it takes its root directory and ports, and listens on 127.0.0.1
// only, so several run side by side in one test without touching /tmp or 0.0.0.0.
// Volumes are real directories under --root-dir (emptyDir, CSI targets); nothing is
// mounted, no container runs.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	remote "k8s.io/cri-client/pkg"
	fakeremote "k8s.io/cri-client/pkg/fake"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"
	"go.opentelemetry.io/otel/trace/noop"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the node (system:node:<name>)")
	name := flag.String("name", "", "node name")
	root := flag.String("root-dir", "", "kubelet root directory")
	port := flag.Int("port", 0, "kubelet API port on 127.0.0.1")
	healthzPort := flag.Int("healthz-port", 0, "healthz port on 127.0.0.1")
	maxPods := flag.Int("max-pods", 110, "pods this node accepts")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *name == "" || *root == "" || *port == 0 {
		klog.Fatal("--kubeconfig, --name, --root-dir and --port are required")
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	config.UserAgent = "hollow-kubelet"
	client := clientset.NewForConfigOrDie(config)

	f, c := kubemark.GetHollowKubeletConfig(&kubemark.HollowKubeletOptions{NodeName: *name, KubeletPort: *port, MaxPods: *maxPods})
	// GetHollowKubeletConfig made a temporary root with static-pods and pod-logs in it: use ours.
	_ = os.RemoveAll(f.RootDirectory)
	f.RootDirectory = *root
	c.StaticPodPath = ""
	c.PodLogsDir = filepath.Join(*root, "pod-logs")
	c.Address = "127.0.0.1"
	c.HealthzBindAddress = "127.0.0.1"
	c.HealthzPort = int32(*healthzPort)
	c.ReadOnlyPort = 0

	heartbeatConfig := *config
	heartbeatConfig.Timeout = min(c.NodeStatusUpdateFrequency.Duration, time.Duration(c.NodeLeaseDurationSeconds)*time.Second)
	heartbeatConfig.QPS = -1
	heartbeatClient := clientset.NewForConfigOrDie(&heartbeatConfig)

	endpoint := "unix://" + filepath.Join(*root, "fake-runtime.sock")
	runtime := fakeremote.NewFakeRemoteRuntime()
	if err := runtime.Start(endpoint); err != nil {
		klog.Fatalf("fake runtime: %v", err)
	}
	defer runtime.Stop()
	runtimeService, err := remote.NewRemoteRuntimeService(ctx, endpoint, 15*time.Second, noop.NewTracerProvider(), false)
	if err != nil {
		klog.Fatalf("runtime service: %v", err)
	}
	hollow := kubemark.NewHollowKubelet(f, c, client, heartbeatClient, &cadvisortest.Fake{NodeName: *name},
		runtime.ImageService, runtimeService, cm.NewStubContainerManager())
	go hollow.Run(ctx)
	<-ctx.Done()
	klog.Info("hollow kubelet stopping")
}
