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
