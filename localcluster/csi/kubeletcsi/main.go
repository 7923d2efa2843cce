// Command kubeletcsi plays the kubelet's side of the CSI and plugin-registration
// protocols against ownerrefs-agent, with the same generated Go code the kubelet links
// (the CSI spec's lib/go/csi and k8s.io/kubelet's pluginregistration/v1). Requests are
// built the way the kubelet builds them for an ephemeral inline volume, so the tests
// that use it check the agent's wire format independently of the agent's own .proto.
//
//	kubeletcsi publish   -endpoint SOCK -volume-id ID -target PATH [-readonly] [-ctx k=v]...
//	kubeletcsi unpublish -endpoint SOCK -volume-id ID -target PATH
//	kubeletcsi register  -registration SOCK
//
// Each prints one JSON object: {"code": "<gRPC code>", "message": "...", ...}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type kv map[string]string

func (m kv) String() string { return fmt.Sprint(map[string]string(m)) }
func (m kv) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want key=value, got %q", s)
	}
	m[k] = v
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: kubeletcsi publish|unpublish|register [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "CSI socket")
	regSocket := fs.String("registration", "", "plugin-registration socket")
	volumeID := fs.String("volume-id", "", "volume handle")
	target := fs.String("target", "", "target path")
	readonly := fs.Bool("readonly", false, "csi.readOnly of the pod's volume source")
	ctxFlags := kv{}
	fs.Var(ctxFlags, "ctx", "volume context key=value (repeatable)")
	_ = fs.Parse(os.Args[2:])

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // the kubelet's csiTimeout
	defer cancel()
	switch os.Args[1] {
	case "publish":
		node := csi.NewNodeClient(dial(*endpoint))
		// As csiDriverClient.NodePublishVolume: ReadWriteOnce maps to SINGLE_NODE_WRITER for a
		// driver without SINGLE_NODE_MULTI_WRITER; a mount volume with no fsType or options.
		_, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
			VolumeId:      *volumeID,
			TargetPath:    *target,
			Readonly:      *readonly,
			VolumeContext: ctxFlags,
			Secrets:       map[string]string{},
			VolumeCapability: &csi.VolumeCapability{
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			},
		})
		report(err, nil)
	case "unpublish":
		node := csi.NewNodeClient(dial(*endpoint))
		_, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: *volumeID, TargetPath: *target})
		report(err, nil)
	case "register":
		register(ctx, *regSocket)
	default:
		fail("unknown command " + os.Args[1])
	}
}

// register does what the kubelet's plugin watcher and CSI plugin handler do with a new
// socket in plugins_registry: GetInfo, validate it, call NodeGetInfo on the endpoint it
// names, then tell the plugin the outcome.
func register(ctx context.Context, socket string) {
	reg := registration.NewRegistrationClient(dial(socket))
	info, err := reg.GetInfo(ctx, &registration.InfoRequest{})
	if err != nil {
		report(err, nil)
		return
	}
	out := map[string]any{"type": info.Type, "name": info.Name, "endpoint": info.Endpoint, "supportedVersions": info.SupportedVersions}
	problem := ""
	switch {
	case info.Type != registration.CSIPlugin:
		problem = "type is " + info.Type
	case !hasV1(info.SupportedVersions):
		problem = fmt.Sprintf("no 1.x version in %v", info.SupportedVersions)
	}
	if problem == "" {
		ni, err := csi.NewNodeClient(dial(info.Endpoint)).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
		if err != nil {
			problem = "NodeGetInfo: " + err.Error()
		} else {
			out["nodeId"] = ni.NodeId
		}
	}
	_, err = reg.NotifyRegistrationStatus(ctx, &registration.RegistrationStatus{PluginRegistered: problem == "", Error: problem})
	out["problem"] = problem
	report(err, out)
}

func hasV1(versions []string) bool {
	for _, v := range versions {
		if strings.HasPrefix(v, "1.") {
			return true
		}
	}
	return false
}

func dial(socket string) *grpc.ClientConn {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err.Error())
	}
	return conn
}

func report(err error, extra map[string]any) {
	out := map[string]any{}
	for k, v := range extra {
		out[k] = v
	}
	st := status.Convert(err)
	out["code"] = st.Code().String()
	out["message"] = st.Message()
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "kubeletcsi:", msg)
	os.Exit(2)
}
