{{/* Labels every object carries; the pods' selector is app.kubernetes.io/name alone, as deploy/'s. */}}
{{- define "kipvs.labels" -}}
app.kubernetes.io/name: kipvs
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The image reference: a digest (sha256:...) is joined with @, a tag with :. */}}
{{- define "kipvs.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if hasPrefix "sha256:" $tag -}}
{{ .Values.image.repository }}@{{ $tag }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* The API server's URL from apiServer.host and apiServer.port (an IPv6 address bracketed). */}}
{{- define "kipvs.apiServerURL" -}}
{{- $host := .Values.apiServer.host | default "control-plane.invalid" -}}
{{- if and (contains ":" $host) (not (hasPrefix "[" $host)) -}}
{{- $host = printf "[%s]" $host -}}
{{- end -}}
https://{{ $host }}:{{ .Values.apiServer.port }}
{{- end -}}

{{/* The port of an address HOST:PORT, as a number. */}}
{{- define "kipvs.port" -}}
{{- $parts := splitList ":" . -}}
{{- last $parts | int -}}
{{- end -}}

{{/* The ConfigMap kipvs reads: its own, or kube-proxy's. */}}
{{- define "kipvs.configMapName" -}}
{{- if .Values.useKubeProxyConfigMap -}}kube-proxy{{- else -}}{{ .Release.Name }}{{- end -}}
{{- end -}}

{{/* The health port the probes use: kube-proxy's ConfigMap decides it in drop-in mode. */}}
{{- define "kipvs.healthzPort" -}}
{{- if .Values.useKubeProxyConfigMap -}}10256{{- else -}}{{ include "kipvs.port" .Values.healthzBindAddress }}{{- end -}}
{{- end -}}

{{/* The metrics port the ServiceMonitor scrapes: kube-proxy's ConfigMap decides it in drop-in mode. */}}
{{- define "kipvs.metricsPort" -}}
{{- if .Values.useKubeProxyConfigMap -}}10249{{- else -}}{{ include "kipvs.port" .Values.metricsBindAddress }}{{- end -}}
{{- end -}}
