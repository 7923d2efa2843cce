// Oracle for the renderer tests: reads a JSON array of owner references (with
// explicit nulls for absent *bool fields) on stdin and writes the bytes Go's
// encoding/json produces for the KEP-4753 wrapper around []metav1.OwnerReference.
//
// With the argument yaml2json: reads a YAML stream and writes each document as JSON on a
// line of its own, as kubectl reads a manifest (apimachinery's YAMLOrJSONDecoder, then
// unstructured JSON), for the tests of render's and inject's YAML; an empty or null document is left out.
package main

import (
	"encoding/json"
	"io"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
)

func yamlToJSON() {
	// kubectl's own reader: JSON values if the input starts with "{", else documents split at
	// "---" lines and decoded by sigs.k8s.io/yaml; each then read as unstructured JSON.
	d := k8syaml.NewYAMLOrJSONDecoder(os.Stdin, 4096)
	for {
		var raw json.RawMessage
		if err := d.Decode(&raw); err == io.EOF {
			return
		} else if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		var v interface{}
		if err := json.Unmarshal(raw, &v); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		if v == nil {
			continue
		}
		j, err := json.Marshal(v)
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		os.Stdout.Write(append(j, '\n'))
	}
}

type document struct {
	Kind       string                  `json:"kind"`
	APIVersion string                  `json:"apiVersion"`
	Items      []metav1.OwnerReference `json:"items"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "yaml2json" {
		yamlToJSON()
		return
	}
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
