{{/* The kubelet root, without a trailing slash. */}}
{{- define "ownerrefs.root" -}}
{{- trimSuffix "/" .Values.kubeletRootDir -}}
{{- end -}}

{{- define "ownerrefs.image" -}}
{{- $repository := .Values.image.repository -}}
{{- $registry := (.Values.global).imageRegistry | default .Values.image.registry -}}
{{- if $registry -}}
{{- /* A mirror keeps the path: the registry (a first component with a dot, a port or localhost) is replaced. */ -}}
{{- $parts := splitList "/" $repository -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $repository = join "/" (rest $parts) -}}
{{- end -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" $registry) $repository -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{ $repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ $repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The pull secrets: a parent chart's global ones, then the chart's own. */}}
{{- define "ownerrefs.imagePullSecrets" -}}
{{- $all := concat ((.Values.global).imagePullSecrets | default list) (.Values.imagePullSecrets | default list) -}}
{{- with $all }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* metadata.labels and metadata.annotations lines for the user's extras (nothing when there are none), at indent 2. */}}
{{- define "ownerrefs.extraMeta" -}}
{{- with .Values.extraLabels }}
  labels:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- with .Values.extraAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end -}}

{{/*
The agent's affinity: .Values.affinity, with the node expressions the chart always adds ANDed
into every required node selector term (the terms are ORed, so each must carry them):
kubernetes.io/arch In .Values.architectures, and, with excludeVirtualKubelet, type NotIn
[virtual-kubelet] (the agent tolerates every taint, virtual-kubelet.io/provider's too).
*/}}
{{- define "ownerrefs.agentAffinity" -}}
{{- $exprs := list (dict "key" "kubernetes.io/arch" "operator" "In" "values" .Values.architectures) -}}
{{- if .Values.excludeVirtualKubelet -}}
{{- $exprs = append $exprs (dict "key" "type" "operator" "NotIn" "values" (list "virtual-kubelet")) -}}
{{- end -}}
{{- $affinity := deepCopy (.Values.affinity | default (dict)) -}}
{{- $node := $affinity.nodeAffinity | default (dict) -}}
{{- $required := $node.requiredDuringSchedulingIgnoredDuringExecution | default (dict) -}}
{{- $terms := list -}}
{{- range ($required.nodeSelectorTerms | default (list (dict))) -}}
{{- $terms = append $terms (set . "matchExpressions" (concat (.matchExpressions | default list) $exprs)) -}}
{{- end -}}
{{- $_ := set $required "nodeSelectorTerms" $terms -}}
{{- $_ = set $node "requiredDuringSchedulingIgnoredDuringExecution" $required -}}
{{- $_ = set $affinity "nodeAffinity" $node -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/*
How KEP-4753's syntax is admitted: "none", "policy", "webhook" or "both" (admission.mode, with
auto decided by what the API server serves, and webhook.enabled as mode webhook).

A direct switch between the webhook and the policy is refused where helm can see the cluster.
To the policy: helm deletes the webhook's configuration as it creates the policy, and the API
server loads a new policy up to about a second later, so pods created in between would meet
neither. Back to the webhook: its configuration (failurePolicy Fail) is in place before its
replicas are ready. "both" is the step between; helm template (no cluster to look up) cannot
tell and does not refuse.
*/}}
{{- define "ownerrefs.admission" -}}
{{- $mode := .Values.admission.mode -}}
{{- if and .Values.webhook.enabled (not (has $mode (list "none" "webhook"))) -}}
{{- fail (printf "webhook.enabled=true and admission.mode=%s: choose one (admission.mode=webhook is webhook.enabled=true)" $mode) -}}
{{- end -}}
{{- $resolved := $mode -}}
{{- if .Values.webhook.enabled -}}{{- $resolved = "webhook" -}}
{{- else if eq $mode "auto" -}}
{{- $resolved = ternary "policy" "webhook" (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy") -}}
{{- end -}}
{{- if eq $resolved "policy" -}}
{{- $webhook := lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" "ownerrefs.dev" -}}
{{- $binding := lookup "admissionregistration.k8s.io/v1" "MutatingAdmissionPolicyBinding" "" "pods.ownerrefs.dev" -}}
{{- if and $webhook (not $binding) -}}
{{- fail "admission.mode=policy straight from the webhook would refuse the pods created while the API server loads the policy: upgrade with admission.mode=both first, then with admission.mode=policy (docs/INSTALL.md, \"From the webhook to the policy\")" -}}
{{- end -}}
{{- end -}}
{{- if and (eq $resolved "webhook") (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy") -}}
{{- $webhook := lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" "ownerrefs.dev" -}}
{{- $binding := lookup "admissionregistration.k8s.io/v1" "MutatingAdmissionPolicyBinding" "" "pods.ownerrefs.dev" -}}
{{- if and $binding (not $webhook) -}}
{{- fail "admission.mode=webhook straight from the policy would refuse the pods created until the webhook's replicas are ready: upgrade with admission.mode=both first, then with admission.mode=webhook (docs/INSTALL.md, \"From the webhook to the policy\")" -}}
{{- end -}}
{{- end -}}
{{- $resolved -}}
{{- end -}}

{{/* Whether the webhook's objects are installed: mode webhook, or both on the way to policy. */}}
{{- define "ownerrefs.admission.webhook" -}}
{{- if has (include "ownerrefs.admission" .) (list "webhook" "both") -}}true{{- end -}}
{{- end -}}

{{/* Whether the MutatingAdmissionPolicies are installed: mode policy, or both. */}}
{{- define "ownerrefs.admission.policy" -}}
{{- if has (include "ownerrefs.admission" .) (list "policy" "both") -}}true{{- end -}}
{{- end -}}

{{/*
The namespace of every namespaced object: namespaceOverride; else the release's (helm -n NS);
else, for a release in `default` (helm without -n), namespace.name: a node agent's pods run
privileged, which the default namespace should not allow.
*/}}
{{- define "ownerrefs.namespace" -}}
{{- if .Values.namespaceOverride -}}
{{- .Values.namespaceOverride -}}
{{- else if ne .Release.Namespace "default" -}}
{{- .Release.Namespace -}}
{{- else -}}
{{- .Values.namespace.name -}}
{{- end -}}
{{- end -}}
