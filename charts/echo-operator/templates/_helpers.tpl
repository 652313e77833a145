{{/*
Names and labels shared by every template of the chart.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "echo-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's objects: fullnameOverride, else <release>-<name>, else the release
name alone when it already contains the name. 63 characters at most (a DNS-1123 label).
*/}}
{{- define "echo-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart-version, as the helm.sh/chart label wants it. */}}
{{- define "echo-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels that select the operator's pods (never change them: Deployment selectors are immutable). */}}
{{- define "echo-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "echo-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of every object of the chart. */}}
{{- define "echo-operator.labels" -}}
helm.sh/chart: {{ include "echo-operator.chart" . }}
{{ include "echo-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: echo
{{- end }}

{{/* The operator's ServiceAccount name. */}}
{{- define "echo-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "echo-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository:tag of the operator image; the tag defaults to the chart's appVersion. */}}
{{- define "echo-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* sha256 of every dashboards/*.json, to restart the operator when one changes. */}}
{{- define "echo-operator.dashboardsChecksum" -}}
{{- $all := "" }}
{{- range $path, $_ := .Files.Glob "dashboards/*.json" }}
{{- $all = printf "%s%s:%s\n" $all $path ($.Files.Get $path | sha256sum) }}
{{- end }}
{{- $all | sha256sum }}
{{- end }}

{{/*
The namespaces the operator watches when it is not cluster-wide, as a JSON list (templates return
strings): watch.namespaces, or the release namespace when that list is empty.
*/}}
{{- define "echo-operator.watchNamespaces" -}}
{{- if .Values.watch.namespaces }}
{{- .Values.watch.namespaces | uniq | toJson }}
{{- else }}
{{- list .Release.Namespace | toJson }}
{{- end }}
{{- end }}

{{/*
RBAC rules on the objects the operator reconciles in a watched namespace. One definition, used by
the ClusterRole (cluster-wide) and by each Role (namespaced), so the two modes grant the same.
The verbs are what the operator calls: server-side apply (patch), create when absent, get, list by
label and delete when pruning; watch only on what kopf watches (EchoDeployments, Deployments,
StatefulSets). No update: nothing is replaced with PUT.
*/}}
{{- define "echo-operator.namespacedRules" -}}
# EchoDeployment: kopf watches it and patches its finalizer and annotations; the status subresource
# carries the conditions and hooksEndpoint.
- apiGroups: ["echo.dev"]
  resources: ["echodeployments"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["echo.dev"]
  resources: ["echodeployments/status"]
  verbs: ["get", "patch"]
# Children are owned with blockOwnerDeletion, which needs update on the owner's finalizers.
- apiGroups: ["echo.dev"]
  resources: ["echodeployments/finalizers"]
  verbs: ["update"]
# The children of an EchoDeployment (DESIGN section 1); the workloads are watched for their status.
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# The Job that runs `echoctl openwebui connect` (spec.openwebui.connect), watched for its outcome.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["configmaps", "secrets", "services"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "create", "patch", "delete"]
# Optional integrations, used only when their CRDs exist: tenant ServiceMonitors and KEDA ScaledObjects.
- apiGroups: ["monitoring.coreos.com"]
  resources: ["servicemonitors"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects"]
  verbs: ["get", "list", "create", "patch", "delete"]
# Read only: the pods of a workload that is not ready, for the kubelet's reason in its condition.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list"]
# kopf posts handler progress and errors as events on the EchoDeployment.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end }}

{{/* kopf's peering objects in a watched namespace (namespaced mode with operator.peering only). */}}
{{- define "echo-operator.peeringRules" -}}
- apiGroups: ["kopf.dev"]
  resources: ["kopfpeerings"]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}

{{/* The ConfigMap holding prometheus-adapter's rule for the distillers' HPA fallback. */}}
{{- define "echo-operator.prometheusAdapterRulesName" -}}
{{- printf "%s-prometheus-adapter-rules" (include "echo-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
prometheus-adapter's external rule for the tenants' distiller HPA fallback (EchoDeployments with
spec.distiller.keda: false): the External metric echo_jobs_pending, in the HPA's namespace,
selected by the `tenant` label the tenants' ServiceMonitors add. Every worker reports the whole
queue, so a tenant's total is the sum over kinds of the max over workers (a sum over workers would
scale without end). The operator's KEDA trigger runs the same query (echo_operator.render_distiller).
*/}}
{{- define "echo-operator.pendingJobsExternalRules" -}}
- seriesQuery: 'echo_jobs_pending{namespace!="",tenant!=""}'
  resources:
    overrides:
      namespace:
        resource: namespace
  name:
    matches: ^echo_jobs_pending$
    as: echo_jobs_pending
  metricsQuery: 'sum by (namespace, tenant) (max by (namespace, tenant, kind) (<<.Series>>{<<.LabelMatchers>>}))'
{{- end }}
