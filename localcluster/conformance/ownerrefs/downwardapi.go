// Package ownerrefs holds this project's conformance specs: KEP-4753's downward API item
// `fieldRef: {fieldPath: metadata.ownerReferences}`, checked the way Kubernetes checks its own
// downward API fields (test/e2e/common/storage/downwardapi_volume.go, projected_downwardapi.go
// and test/e2e/common/node/downwardapi.go): a pod reads the item with agnhost's mounttest or
// busybox's env, and the spec matches the container's log.
//
// The API server alone refuses that fieldPath; with the ownerrefs webhook and agent installed
// the pod runs and reads the KEP document of its owners. Each spec fails without them, at the
// creation of its pod. They are labelled [ownerrefs.dev]: --ginkgo.focus='\[ownerrefs\.dev\]'.
package ownerrefs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/kubernetes/test/e2e/framework"
	e2epod "k8s.io/kubernetes/test/e2e/framework/pod"
	e2epodoutput "k8s.io/kubernetes/test/e2e/framework/pod/output"
	e2eskipper "k8s.io/kubernetes/test/e2e/framework/skipper"
	imageutils "k8s.io/kubernetes/test/utils/image"
	admissionapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
)

const (
	// The KEP's field path, as a pod author writes it.
	ownersField = "metadata.ownerReferences"
	mountDir    = "/etc/podinfo"
	ownersFile  = mountDir + "/ownerReferences"
	reader      = "client-container"
	// How long a file may take to follow its pod's owners: the agent's PATCH, then the
	// kubelet's next sync of the pod's volumes (upstream allows label updates 3 minutes).
	followTimeout = 3 * time.Minute
)

// kepDocument is what the KEP says the item reads: Go's encoding/json of the owners inside
// {"kind":"OwnerReference","apiVersion":"meta/v1","items":[...]}, with "items":[] for none.
func kepDocument(owners ...metav1.OwnerReference) string {
	doc := struct {
		Kind       string                  `json:"kind"`
		APIVersion string                  `json:"apiVersion"`
		Items      []metav1.OwnerReference `json:"items"`
	}{Kind: "OwnerReference", APIVersion: "meta/v1", Items: append([]metav1.OwnerReference{}, owners...)}
	b, err := json.Marshal(doc)
	framework.ExpectNoError(err, "marshalling the KEP document")
	return string(b)
}

// mounttestSays is agnhost mounttest's line for --file_content of `path`: the whole content
// between `: ` and the newline, so a substring match is an exact match of the file.
func mounttestSays(path, content string) string {
	return fmt.Sprintf("content of file %q: %s\n", path, content)
}

// newOwner creates a ConfigMap in the test's namespace and returns a reference to it: an
// owner that exists, with a uid the API server gave it.
func newOwner(ctx context.Context, f *framework.Framework, prefix string) metav1.OwnerReference {
	cm, err := f.ClientSet.CoreV1().ConfigMaps(f.Namespace.Name).Create(ctx,
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	framework.ExpectNoError(err, "creating a ConfigMap to own the pod")
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}
}

// ownersItem is the KEP's item: the owners, in the file `ownerReferences`.
func ownersItem(mode *int32) v1.DownwardAPIVolumeFile {
	return v1.DownwardAPIVolumeFile{
		Path:     "ownerReferences",
		FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: ownersField},
		Mode:     mode,
	}
}

// readerPod is a pod owned by `owners` that mounts `source` at /etc/podinfo and runs agnhost
// mounttest with `args` once (restartPolicy Never).
func readerPod(name string, owners []metav1.OwnerReference, source v1.VolumeSource, args ...string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:         reader,
				Image:        imageutils.GetE2EImage(imageutils.Agnhost),
				Args:         append([]string{"mounttest"}, args...),
				VolumeMounts: []v1.VolumeMount{{Name: "podinfo", MountPath: mountDir}},
			}},
			Volumes:       []v1.Volume{{Name: "podinfo", VolumeSource: source}},
			RestartPolicy: v1.RestartPolicyNever,
		},
	}
}

// downwardVolume is a downwardAPI volume of the given items.
func downwardVolume(defaultMode *int32, items ...v1.DownwardAPIVolumeFile) v1.VolumeSource {
	return v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items, DefaultMode: defaultMode}}
}

var _ = framework.Describe(framework.WithLabel("ownerrefs.dev"), "Downward API volume: ownerReferences", func() {
	f := framework.NewDefaultFramework("ownerrefs-volume")
	f.NamespacePodSecurityLevel = admissionapi.LevelBaseline

	/*
		Like: DownwardAPI volume, pod name ("should provide podname only").
		A pod owned by a ConfigMap (as its controller, blocking its deletion) has a downwardAPI
		volume with the item metadata.ownerReferences. The file MUST hold the KEP document of
		that owner, byte for byte what Go's encoding/json makes of it, uid included.
	*/
	f.It("should provide the pod's owners as the KEP's document", func(ctx context.Context) {
		owner := newOwner(ctx, f, "owner")
		owner.Controller, owner.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
		pod := readerPod("ownerrefs-volume-"+string(uuid.NewUUID()), []metav1.OwnerReference{owner},
			downwardVolume(nil, ownersItem(nil)), "--file_content="+ownersFile)

		e2epodoutput.TestContainerOutput(ctx, f, "downward API volume plugin", pod, 0, []string{
			mounttestSays(ownersFile, kepDocument(owner)),
		})
	})

	/*
		A pod without owners reads a document with an empty list, not null and not an empty file.
	*/
	f.It("should provide an empty items list for a pod without owners", func(ctx context.Context) {
		pod := readerPod("ownerrefs-volume-"+string(uuid.NewUUID()), nil,
			downwardVolume(nil, ownersItem(nil)), "--file_content="+ownersFile)

		e2epodoutput.TestContainerOutput(ctx, f, "downward API volume plugin", pod, 0, []string{
			mounttestSays(ownersFile, `{"kind":"OwnerReference","apiVersion":"meta/v1","items":[]}`),
		})
	})

	/*
		Like: DownwardAPI volume, file mode 0400 ("should set mode on item file").
		The item's mode MUST be the file's mode, and the file MUST still hold the owners.
	*/
	f.It("should set mode on the ownerReferences item file [LinuxOnly]", func(ctx context.Context) {
		owner := newOwner(ctx, f, "owner")
		pod := readerPod("ownerrefs-volume-"+string(uuid.NewUUID()), []metav1.OwnerReference{owner},
			downwardVolume(nil, ownersItem(ptr.To[int32](0400))), "--file_mode="+ownersFile, "--file_content="+ownersFile)

		e2epodoutput.TestContainerOutput(ctx, f, "downward API volume plugin", pod, 0, []string{
			fmt.Sprintf("mode of file %q: -r--------\n", ownersFile),
			mounttestSays(ownersFile, kepDocument(owner)),
		})
	})

	/*
		Like: "should provide podname as non-root with fsgroup and defaultMode".
		With runAsUser 1000, fsGroup 1001 and defaultMode 0440, the file MUST be -r--r----- of
		group 1001, and the non-root container MUST read the owners from it.
	*/
	f.It("should provide the owners to a non-root reader with fsGroup and defaultMode [LinuxOnly]", func(ctx context.Context) {
		e2eskipper.SkipIfNodeOSDistroIs("windows")
		owner := newOwner(ctx, f, "owner")
		pod := readerPod("ownerrefs-volume-"+string(uuid.NewUUID()), []metav1.OwnerReference{owner},
			downwardVolume(ptr.To[int32](0440), ownersItem(nil)), "--file_mode="+ownersFile, "--file_owner="+ownersFile, "--file_content="+ownersFile)
		pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](1001)}

		e2epodoutput.TestContainerOutput(ctx, f, "downward API volume plugin", pod, 0, []string{
			fmt.Sprintf("mode of file %q: -r--r-----\n", ownersFile),
			fmt.Sprintf("owner GID of %q: 1001\n", ownersFile),
			mounttestSays(ownersFile, kepDocument(owner)),
		})
	})

	/*
		Like: DownwardAPI volume, update label ("should update labels on modification").
		A running pod owned by one ConfigMap is orphaned (its ownerReferences emptied), then
		adopted by another. The mounted file MUST follow: the first owner, then no owner, then
		the second, each read by the running container.
	*/
	f.It("should update the file when the pod is orphaned and adopted", func(ctx context.Context) {
		podClient := e2epod.NewPodClient(f)
		first, second := newOwner(ctx, f, "first"), newOwner(ctx, f, "second")
		name := "ownerrefs-follow-" + string(uuid.NewUUID())
		pod := readerPod(name, []metav1.OwnerReference{first}, downwardVolume(nil, ownersItem(nil)),
			"--break_on_expected_content=false", "--retry_time=240", "--file_content_in_loop="+ownersFile)
		ginkgo.By("Creating the pod, owned by the first ConfigMap")
		podClient.CreateSync(ctx, pod)
		logs := func(ctx context.Context) (string, error) {
			return e2epod.GetPodLogs(ctx, f.ClientSet, f.Namespace.Name, name, reader)
		}
		gomega.Eventually(ctx, logs, followTimeout, framework.Poll).Should(gomega.ContainSubstring(mounttestSays(ownersFile, kepDocument(first))))

		ginkgo.By("Orphaning the pod")
		podClient.Update(ctx, name, func(pod *v1.Pod) { pod.OwnerReferences = nil })
		gomega.Eventually(ctx, logs, followTimeout, framework.Poll).Should(gomega.ContainSubstring(mounttestSays(ownersFile, kepDocument())))

		ginkgo.By("Adopting the pod by the second ConfigMap")
		podClient.Update(ctx, name, func(pod *v1.Pod) { pod.OwnerReferences = []metav1.OwnerReference{second} })
		gomega.Eventually(ctx, logs, followTimeout, framework.Poll).Should(gomega.ContainSubstring(mounttestSays(ownersFile, kepDocument(second))))
	})
})

var _ = framework.Describe(framework.WithLabel("ownerrefs.dev"), "Projected downwardAPI: ownerReferences", func() {
	f := framework.NewDefaultFramework("ownerrefs-projected")
	f.NamespacePodSecurityLevel = admissionapi.LevelBaseline

	/*
		Like: Projected Volume, DownwardAPI, pod name. A projected volume's downwardAPI source
		with the pod's name and its owners: both files MUST hold their values.
	*/
	f.It("should provide the owners beside the pod's name", func(ctx context.Context) {
		owner := newOwner(ctx, f, "owner")
		name := "ownerrefs-projected-" + string(uuid.NewUUID())
		source := v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{
			DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "podname", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}},
				ownersItem(nil),
			}},
		}}}}
		// mounttest reads one --file_content: a second container reads the owners.
		pod := readerPod(name, []metav1.OwnerReference{owner}, source, "--file_content="+mountDir+"/podname")
		owners := pod.Spec.Containers[0]
		owners.Name, owners.Args = "owners-container", []string{"mounttest", "--file_content=" + ownersFile}
		pod.Spec.Containers = append(pod.Spec.Containers, owners)

		e2epodoutput.TestContainerOutputsMatcher(ctx, f, "projected downward API", pod, map[int][]string{
			0: {mounttestSays(mountDir+"/podname", name)},
			1: {mounttestSays(ownersFile, kepDocument(owner))},
		}, gomega.ContainSubstring)
	})
})

var _ = framework.Describe(framework.WithLabel("ownerrefs.dev"), "Downward API: ownerReferences", func() {
	f := framework.NewDefaultFramework("ownerrefs-env")
	f.NamespacePodSecurityLevel = admissionapi.LevelBaseline

	/*
		Like: DownwardAPI, environment for name, namespace and ip. A container's env
		OWNER_REFERENCES from fieldRef metadata.ownerReferences MUST hold, from the container's
		start, the KEP document of the pod's owners.
	*/
	f.It("should provide the owners as an env var", func(ctx context.Context) {
		owner := newOwner(ctx, f, "owner")
		owner.Controller = ptr.To(true)
		name := "ownerrefs-env-" + string(uuid.NewUUID())
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: v1.PodSpec{
				Containers: []v1.Container{{
					Name:    "dapi-container",
					Image:   imageutils.GetE2EImage(imageutils.BusyBox),
					Command: []string{"sh", "-c", "env"},
					Env: []v1.EnvVar{
						{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
						{Name: "OWNER_REFERENCES", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: ownersField}}},
					},
				}},
				RestartPolicy: v1.RestartPolicyNever,
			},
		}

		e2epodoutput.TestContainerOutput(ctx, f, "downward api env vars", pod, 0, []string{
			"POD_NAME=" + name + "\n",
			"OWNER_REFERENCES=" + kepDocument(owner) + "\n",
		})
	})
})
