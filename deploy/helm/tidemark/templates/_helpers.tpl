{{/* The chart's name, and the objects' base name (63 characters at most). */}}
{{- define "tidemark.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tidemark.fullname" -}}
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

{{- define "tidemark.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "tidemark.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component: include with (dict "root" $ "component" "coordinator"). */}}
{{- define "tidemark.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tidemark.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "tidemark.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "tidemark.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tidemark.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* A pipeline's name as a DNS label: lower case, '_' as '-'. */}}
{{- define "tidemark.pipelineSlug" -}}
{{- . | lower | replace "_" "-" | trunc 40 | trimSuffix "-" }}
{{- end }}

{{/* KAFKA_SECURITY_PROTOCOL from kafka.sasl.enabled and kafka.tls.enabled. */}}
{{- define "tidemark.securityProtocol" -}}
{{- $k := .Values.kafka -}}
{{- if and $k.sasl.enabled $k.tls.enabled }}SASL_SSL
{{- else if $k.sasl.enabled }}SASL_PLAINTEXT
{{- else if $k.tls.enabled }}SSL
{{- else }}PLAINTEXT
{{- end }}
{{- end }}

{{/* The environment every Tidemark process reads: Kafka, its security, the topic prefix. */}}
{{- define "tidemark.kafkaEnv" -}}
{{- $k := .Values.kafka -}}
- name: KAFKA_BOOTSTRAP_SERVERS
  value: {{ $k.bootstrapServers | quote }}
- name: TIDEMARK_GROUP_PROTOCOL
  value: {{ $k.groupProtocol | quote }}
- name: TIDEMARK_TOPIC_PREFIX
  value: {{ .Values.topicPrefix | quote }}
- name: KAFKA_SECURITY_PROTOCOL
  value: {{ include "tidemark.securityProtocol" . | quote }}
{{- if $k.sasl.enabled }}
- name: KAFKA_SASL_MECHANISM
  value: {{ $k.sasl.mechanism | quote }}
- name: KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ required "kafka.sasl.existingSecret: the Secret holding the SASL username and password" $k.sasl.existingSecret | quote }}
      key: {{ $k.sasl.usernameKey | quote }}
- name: KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $k.sasl.existingSecret | quote }}
      key: {{ $k.sasl.passwordKey | quote }}
{{- end }}
{{- if and $k.tls.enabled $k.tls.caSecret }}
- name: KAFKA_SSL_CA_LOCATION
  value: /etc/tidemark/kafka-ca/{{ $k.tls.caKey }}
{{- end }}
{{- if and $k.tls.enabled $k.tls.clientSecret }}
- name: KAFKA_SSL_CERTIFICATE_LOCATION
  value: /etc/tidemark/kafka-client/tls.crt
- name: KAFKA_SSL_KEY_LOCATION
  value: /etc/tidemark/kafka-client/tls.key
{{- end }}
{{- end }}

{{/* TIDEMARK_SESSION_TIMEOUT_MS: the coordinators' and the workers' group session. */}}
{{- define "tidemark.sessionEnv" -}}
- name: TIDEMARK_SESSION_TIMEOUT_MS
  value: {{ .Values.sessionTimeoutMs | quote }}
{{- end }}

{{/* Volume mounts and volumes: /tmp (the root filesystem is read-only) and the TLS Secrets. */}}
{{- define "tidemark.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.caSecret }}
- name: kafka-ca
  mountPath: /etc/tidemark/kafka-ca
  readOnly: true
{{- end }}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.clientSecret }}
- name: kafka-client
  mountPath: /etc/tidemark/kafka-client
  readOnly: true
{{- end }}
{{- end }}

{{- define "tidemark.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ .Values.kafka.tls.caSecret | quote }}
{{- end }}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.clientSecret }}
- name: kafka-client
  secret:
    secretName: {{ .Values.kafka.tls.clientSecret | quote }}
{{- end }}
{{- end }}

{{/* What every Tidemark pod spec starts with. */}}
{{- define "tidemark.podCommon" -}}
serviceAccountName: {{ include "tidemark.serviceAccountName" . }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A probe: an action (httpGet or tcpSocket) with a probe's timing values. */}}
{{- define "tidemark.probe" -}}
{{- toYaml .action }}
{{- with .timing }}
{{ toYaml . }}
{{- end }}
{{- end }}
