// Oracle for the renderer tests: reads a JSON array of owner references (with
// explicit nulls for absent *bool fields) on stdin and writes the bytes Go's
// encoding/json produces for the KEP-4753 wrapper around []metav1.OwnerReference.
//
// With the argument yaml2json: reads a YAML stream and writes each document as JSON on a
// line of its own, as kubectl reads a manifest (sigs.k8s.io/yaml), for inject's tests.
package main

import (
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func yamlToJSON() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(1)
	}
	for _, doc := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(in), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(doc))
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
