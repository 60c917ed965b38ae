{{- define "llmbench.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "llmbench.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "llmbench.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "llmbench.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "llmbench.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llmbench.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "llmbench.dashboardSelectorLabels" -}}
app.kubernetes.io/name: {{ include "llmbench.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dashboard
{{- end -}}

{{- define "llmbench.dashboardNamespace" -}}
{{- default .Release.Namespace .Values.dashboard.namespace -}}
{{- end -}}

{{- define "llmbench.dashboardLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "llmbench.dashboardSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "llmbench.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "llmbench.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "llmbench.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "llmbench.watchNamespace" -}}
{{- default .Release.Namespace .Values.watchNamespace -}}
{{- end -}}

{{/* The rules the operator uses, and nothing more: each verb maps to a call in operator/src. */}}
{{- define "llmbench.workloadRules" -}}
- apiGroups: ["llmbench.dev"]
  resources: ["benchmarkruns"]
  # watch/list: the controller; get: the fresh read each reconcile; patch: adding/removing the cleanup finalizer;
  # create/delete: an experiment's runs, created one per treatment and repeat, deleted with the experiment.
  verbs: ["get", "list", "watch", "patch", "create", "delete"]
- apiGroups: ["llmbench.dev"]
  resources: ["benchmarkruns/status"]
  verbs: ["patch"]
- apiGroups: ["llmbench.dev"]
  # Owner references with blockOwnerDeletion need update on the owner's finalizers subresource.
  resources: ["benchmarkruns/finalizers"]
  verbs: ["update"]
- apiGroups: ["llmbench.dev"]
  resources: ["benchmarkexperiments"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["llmbench.dev"]
  resources: ["benchmarkexperiments/status"]
  verbs: ["patch"]
- apiGroups: ["llmbench.dev"]
  resources: ["benchmarkexperiments/finalizers"]
  verbs: ["update"]
- apiGroups: ["llmbench.dev"]
  resources: ["workloadprofiles"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["llmbench.dev"]
  resources: ["workloadprofiles/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["pods"]
  # get: an experiment's collector pod, read by name.
  verbs: ["create", "get", "list", "watch", "delete"]
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["configmaps"]
  # <run>-profile and <experiment>-plan: read to check who owns one of that name (get), created where absent,
  # server-side applied while owned (patch), deleted with their owner.
  verbs: ["get", "create", "patch", "delete"]
- apiGroups: [""]
  # Created if absent, reused if present, never updated or deleted.
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "create"]
- apiGroups: ["apps"]
  # A run's standalone stack: watched (list, watch), read for readiness and the heartbeat (get), created where
  # absent, deleted after the run.
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: [""]
  # The standalone stack's Service.
  resources: ["services"]
  verbs: ["get", "create", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{- define "llmbench.leaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: [{{ include "llmbench.fullname" . | quote }}]
  verbs: ["get", "update"]
{{- end -}}
