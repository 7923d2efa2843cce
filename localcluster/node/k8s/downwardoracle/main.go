// Test oracle for projections/downwardapi.ts: the kubelet's own downwardAPI volume code
// (downwardapi.CollectData, with the node's allocatable) on a pod and a volume source
// read from stdin. Items naming metadata.ownerReferences, which the kubelet does not
// know, are answered with encoding/json over the KEP-4753 wrapper instead.
//
// stdin:  {"pod": v1.Pod, "source": v1.DownwardAPIVolumeSource, "allocatable": v1.ResourceList}
// stdout: {"files": {"<path>": {"mode": 420, "data": "<base64>"}}, "error": "..."}
package main

import (
	"encoding/json"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/downwardapi"
)

type input struct {
	Pod         v1.Pod                     `json:"pod"`
	Source      v1.DownwardAPIVolumeSource `json:"source"`
	Allocatable v1.ResourceList            `json:"allocatable"`
}

type file struct {
	Mode int32  `json:"mode"`
	Data []byte `json:"data"`
}

type output struct {
	Files map[string]file `json:"files"`
	Error string          `json:"error,omitempty"`
}

// host is the one VolumeHost method CollectData calls; the rest stay nil.
type host struct {
	volume.VolumeHost
	allocatable v1.ResourceList
}

func (h host) GetNodeAllocatable() (v1.ResourceList, error) { return h.allocatable, nil }

type kepDocument struct {
	Kind       string                  `json:"kind"`
	APIVersion string                  `json:"apiVersion"`
	Items      []metav1.OwnerReference `json:"items"`
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(1)
	}
	mode := in.Source.DefaultMode
	if mode == nil {
		m := int32(0644)
		mode = &m
	}
	var kep, rest []v1.DownwardAPIVolumeFile
	for _, item := range in.Source.Items {
		if item.FieldRef != nil && item.FieldRef.FieldPath == "metadata.ownerReferences" {
			kep = append(kep, item)
		} else {
			rest = append(rest, item)
		}
	}
	out := output{Files: map[string]file{}}
	data, err := downwardapi.CollectData(rest, &in.Pod, host{allocatable: in.Allocatable}, mode)
	if err != nil {
		out.Error = err.Error()
	}
	for p, f := range data {
		out.Files[p] = file{Mode: f.Mode, Data: f.Data}
	}
	owners := in.Pod.OwnerReferences
	if owners == nil {
		owners = []metav1.OwnerReference{}
	}
	doc, _ := json.Marshal(kepDocument{Kind: "OwnerReference", APIVersion: "meta/v1", Items: owners})
	for _, item := range kep {
		m := *mode
		if item.Mode != nil {
			m = *item.Mode
		}
		// The key CollectData uses; order among items is not modelled (tests avoid repeats).
		out.Files[filepath.Clean(item.Path)] = file{Mode: m, Data: doc}
	}
	enc, _ := json.Marshal(out)
	os.Stdout.Write(enc)
}
