{{/* The release's base name: the release name, or <release>-corral unless it holds "corral". */}}
{{- define "corral.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "corral.operatorName" -}}{{ include "corral.fullname" . }}-operator{{- end -}}
{{- define "corral.apiName" -}}{{ include "corral.fullname" . }}-api{{- end -}}
{{- define "corral.tlsSecretName" -}}
{{- .Values.api.tls.secretName | default (printf "%s-tls" (include "corral.apiName" .)) -}}
{{- end -}}
{{- define "corral.caSecretName" -}}{{ include "corral.apiName" . }}-ca{{- end -}}
{{- define "corral.bootstrapSecretName" -}}{{ include "corral.fullname" . }}-bootstrap{{- end -}}

{{/* corral's code keeps its objects in this namespace (core/corral/core/api/names.py). */}}
{{- define "corral.systemNamespace" -}}svc-system{{- end -}}

{{- define "corral.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Labels of every object; pass (dict "ctx" $ "component" "operator"). */}}
{{- define "corral.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{ include "corral.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end -}}

{{- define "corral.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/* Where users reach the API: the value, the Ingress host, or the Service's cluster name. */}}
{{- define "corral.externalURL" -}}
{{- if .Values.api.externalURL -}}
{{- .Values.api.externalURL -}}
{{- else if .Values.ingress.enabled -}}
{{- printf "https://%s" .Values.ingress.host -}}
{{- else -}}
{{- printf "https://%s.%s.svc" (include "corral.apiName" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* The variables the kubelet injects for the API Service: CORRAL_API_SERVICE_HOST, ... */}}
{{- define "corral.serviceEnvPrefix" -}}
{{- include "corral.apiName" . | upper | replace "-" "_" -}}
{{- end -}}

{{/* The container security context both processes (and the test pod) run with. */}}
{{- define "corral.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "corral.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
The generated serving certificate, as YAML {ca, caKey, cert, key, sans}, computed once per
render (every template that includes it sees the same one). Reused from the cluster (lookup)
so that an upgrade does not rotate it: the CA always, the certificate while its names stay the
same. A new name (the Ingress host, say) gets a new certificate from the same CA, so clients
that trust the CA keep trusting the server.
*/}}
{{- define "corral.generatedTLS" -}}
{{- if not (hasKey $ "corralGeneratedTLS") -}}
{{- $ns := .Release.Namespace -}}
{{- $service := include "corral.apiName" . -}}
{{- $dns := list $service (printf "%s.%s" $service $ns) (printf "%s.%s.svc" $service $ns) (printf "%s.%s.svc.cluster.local" $service $ns) -}}
{{- if .Values.ingress.enabled -}}
{{- $dns = append $dns .Values.ingress.host -}}
{{- end -}}
{{- $ips := .Values.api.tls.extraIPs -}}
{{- /* Links, kubeconfigs and node commands name the external URL's host: clients check it. */ -}}
{{- with .Values.api.externalURL -}}
{{- $host := regexReplaceAll ":[0-9]+$" (urlParse .).host "" | trimPrefix "[" | trimSuffix "]" -}}
{{- if or (regexMatch "^[0-9.]+$" $host) (contains ":" $host) -}}
{{- $ips = append $ips $host -}}
{{- else -}}
{{- $dns = append $dns $host -}}
{{- end -}}
{{- end -}}
{{- $dns = concat $dns .Values.api.tls.extraSANs | uniq -}}
{{- $ips = $ips | uniq -}}
{{- $sans := concat $dns $ips | join "," -}}
{{- $days := int .Values.api.tls.validityDays -}}
{{- $ca := dict -}}
{{- $stored := (lookup "v1" "Secret" $ns (include "corral.caSecretName" .)).data | default dict -}}
{{- if and (index $stored "tls.crt") (index $stored "tls.key") -}}
{{- $ca = buildCustomCert (index $stored "tls.crt") (index $stored "tls.key") -}}
{{- else -}}
{{- $ca = genCA (printf "%s CA" $service) $days -}}
{{- end -}}
{{- $result := dict "ca" $ca.Cert "caKey" $ca.Key "sans" $sans -}}
{{- $current := lookup "v1" "Secret" $ns (include "corral.tlsSecretName" .) -}}
{{- $data := $current.data | default dict -}}
{{- $annotations := ($current.metadata | default dict).annotations | default dict -}}
{{- if and (index $data "tls.crt") (index $data "tls.key") (eq (index $data "ca.crt" | default "") ($ca.Cert | b64enc)) (eq (index $annotations "management.svc.io/certificate-sans" | default "") $sans) -}}
{{- $_ := set $result "cert" (index $data "tls.crt" | b64dec) -}}
{{- $_ := set $result "key" (index $data "tls.key" | b64dec) -}}
{{- else -}}
{{- $cert := genSignedCert $service $ips $dns $days $ca -}}
{{- $_ := set $result "cert" $cert.Cert -}}
{{- $_ := set $result "key" $cert.Key -}}
{{- end -}}
{{- $_ := set $ "corralGeneratedTLS" $result -}}
{{- end -}}
{{- toYaml (get $ "corralGeneratedTLS") -}}
{{- end -}}
