{{/* The kubelet root, without a trailing slash. */}}
{{- define "ownerrefs.root" -}}
{{- trimSuffix "/" .Values.kubeletRootDir -}}
{{- end -}}

{{- define "ownerrefs.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
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
How KEP-4753's syntax is admitted: "none", "policy" or "webhook" (admission.mode, with auto
decided by what the API server serves, and webhook.enabled as mode webhook).
*/}}
{{- define "ownerrefs.admission" -}}
{{- $mode := .Values.admission.mode -}}
{{- if and .Values.webhook.enabled (not (has $mode (list "none" "webhook"))) -}}
{{- fail (printf "webhook.enabled=true and admission.mode=%s: choose one (admission.mode=webhook is webhook.enabled=true)" $mode) -}}
{{- end -}}
{{- if .Values.webhook.enabled -}}webhook
{{- else if eq $mode "auto" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}policy{{- else -}}webhook{{- end -}}
{{- else -}}{{ $mode }}
{{- end -}}
{{- end -}}
