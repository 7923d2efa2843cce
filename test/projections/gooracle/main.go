// Oracle for the renderer tests: reads a JSON array of owner references (with
// explicit nulls for absent *bool fields) on stdin and writes the bytes Go's
// encoding/json produces for the KEP-4753 wrapper around []metav1.OwnerReference.
package main

import (
	"encoding/json"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type document struct {
	Kind       string                   `json:"kind"`
	APIVersion string                   `json:"apiVersion"`
	Items      []metav1.OwnerReference `json:"items"`
}

func main() {
	var owners []metav1.OwnerReference
	if err := json.NewDecoder(os.Stdin).Decode(&owners); err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(1)
	}
	if owners == nil {
		owners = []metav1.OwnerReference{}
	}
	out, err := json.Marshal(document{Kind: "OwnerReference", APIVersion: "meta/v1", Items: owners})
	if err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
