// Oracle for the renderer tests: reads a JSON array of owner references (with
// explicit nulls for absent *bool fields) on stdin and writes the bytes Go's
// encoding/json produces for the KEP-4753 wrapper around []metav1.OwnerReference.
//
// With the argument yaml2json: reads a YAML stream and writes each document as JSON on a
// line of its own, as kubectl reads a manifest (apimachinery's YAML reader, then
// sigs.k8s.io/yaml), for the tests of render's and inject's YAML; an empty or null document is left out.
package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func yamlToJSON() {
	// kubectl's own reader: documents split at "---" lines, each decoded by sigs.k8s.io/yaml.
	r := k8syaml.NewYAMLReader(bufio.NewReader(os.Stdin))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return
		}
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		if strings.TrimSpace(string(doc)) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		if string(j) == "null" {
			continue
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
