// Regenerates the plain-kubectl manifests from the Helm chart, so that they are exactly the
// chart's renderings (test/packaging/chart.test.ts fails when they drift):
//   daemonset.yaml            the chart with its default values
//   rbac-follow-owners.yaml   the chart's follow-owners template, switched on
// the chart's webhook template from webhook.yaml (itself partly generated from
// agent/manifests/webhookconfig.ts by scripts/gen-webhook-config.ts: run that first), and the
// chart's agent-policy template from agent/manifests/agentpolicy.ts.
//   node scripts/gen-manifests.ts
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { agentPolicy } from '../agent/manifests/agentpolicy.ts';
import { annotationWritersPolicy } from '../agent/manifests/writerspolicy.ts';
import { forbidReadingPolicy } from '../agent/manifests/forbidpolicy.ts';
import { admissionPolicies } from '../agent/admission/policy/policy.ts';
import { gateObjects, gatePolicy } from '../agent/manifests/gate.ts';
import { agentVersion } from '../agent/version.ts';
import { WEBHOOK_NAMESPACE } from '../projections/names.ts';

const ROOT = path.join(import.meta.dirname, '..');
export const CHART = path.join(ROOT, 'charts', 'ownerrefs-agent');

/** The directory holding helm and promtool, built (or found cached) by localcluster/tools/build.sh. */
export function toolsDir(): string {
  return execFileSync('bash', [path.join(ROOT, 'localcluster', 'tools', 'build.sh')], { stdio: ['ignore', 'pipe', 'inherit'] }).toString().trim().split('\n').pop()!;
}

export function helmBin(): string {
  return path.join(toolsDir(), 'helm');
}

export function helmTemplate(helm: string, args: string[] = []): string {
  return execFileSync(helm, ['template', 'ownerrefs-agent', CHART, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
}

const GENERATED = (what: string) => `# Generated from charts/ownerrefs-agent (${what}) by scripts/gen-manifests.ts:\n# edit the chart, then run node scripts/gen-manifests.ts.\n`;

export function daemonsetYaml(helm: string): string {
  return GENERATED('default values') + helmTemplate(helm);
}

export function followOwnersYaml(helm: string): string {
  return `# Extra RBAC for following owners, for the agent and the webhook: the workload's identity
# that pods read (ownerrefs.dev/workload-name and the others), and the controllerChain and
# workloadOwnerReferences files. Apply it knowingly; for the files, label the nodes that follow:
#
#   kubectl apply -f rbac-follow-owners.yaml
#   kubectl label node NODE ownerrefs.dev/follow-owners=true
#
# The agent reads owners' metadata (PartialObjectMetadata: no spec, no status), one read per
# owner per node, again every --owner-refresh-seconds while pods use it. To follow a custom
# kind (an Argo Rollout owning ReplicaSets), install the chart with
# followOwners.extraKinds=[group/version/Kind=resource], which adds its get rule and the flag.
` + GENERATED('followOwners.rbac=true, this template only') + helmTemplate(helm, ['--set', 'followOwners.rbac=true', '--show-only', 'templates/follow-owners.yaml']);
}

/** One object of webhook.yaml with the chart's extraLabels and extraAnnotations in its top-level metadata, as every other object has them. */
function withExtraMetadata(doc: string): string {
  const lines = doc.split('\n');
  const start = lines.indexOf('metadata:');
  if (start < 0) return doc;
  let end = start + 1;
  while (end < lines.length && lines[end]!.startsWith('  ')) end++;
  const labels = lines.indexOf('  labels:', start);
  const extraLabels = ['    {{- with .Values.extraLabels }}', '    {{- toYaml . | nindent 4 }}', '    {{- end }}'];
  const annotations = ['  {{- with .Values.extraAnnotations }}', '  annotations:', '    {{- toYaml . | nindent 4 }}', '  {{- end }}'];
  if (labels > start && labels < end) {
    let last = labels + 1;
    while (last < end && lines[last]!.startsWith('    ')) last++;
    lines.splice(end, 0, ...annotations);
    lines.splice(last, 0, ...extraLabels);
  } else {
    lines.splice(end, 0, '  {{- with .Values.extraLabels }}', '  labels:', '    {{- toYaml . | nindent 4 }}', '  {{- end }}', ...annotations);
  }
  return lines.join('\n');
}

/**
 * The chart's webhook template: webhook.yaml, with its namespace, image and pull secrets,
 * replicas, priority class, log level, resources, placement (node selector, affinity,
 * tolerations, spread), pod labels and annotations, extra labels and
 * annotations from the values; its PodDisruptionBudget only with more than one
 * replica (minAvailable 1 of 1 would block every drain).
 */
export function webhookTemplate(): string {
  const text = readFileSync(path.join(ROOT, 'webhook.yaml'), 'utf8');
  const body = text.split('\n').map((line) => {
    if (line.trimStart().startsWith('#')) return line;
    return line
      .replace(/\bownerrefs-system\b/g, '{{ include "ownerrefs.namespace" . }}')
      .replace(/image: ghcr\.io\/ownerrefs-dev\/ownerrefs-agent:[^\s]+/, 'image: {{ include "ownerrefs.image" . }}')
      .replace(/^(\s*)replicas: 2$/, '$1replicas: {{ .Values.webhook.replicas }}')
      .replace(/^(\s*)imagePullPolicy: IfNotPresent$/, '$1imagePullPolicy: {{ .Values.image.pullPolicy }}')
      .replace(/^(\s*)priorityClassName: system-cluster-critical$/, '$1{{- with .Values.webhook.priorityClassName }}\n$1priorityClassName: {{ . }}\n$1{{- end }}')
      .replace(/^(\s*)value: info$/, '$1value: {{ .Values.logLevel }}')
      // admission.mode=both: the policies admit on their own, so a webhook not ready yet (on the
      // way back from the policy) must not refuse what they admitted.
      .replace(/^(\s*)failurePolicy: Fail$/, '$1failurePolicy: {{ if eq (include "ownerrefs.admission" .) "both" }}Ignore{{ else }}{{ .Values.webhook.failurePolicy }}{{ end }}')
      .replace(/^(\s*)timeoutSeconds: 5$/, '$1timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}')
      // The HTTPS port: its own, or one free on the node's network (webhook.hostNetwork).
      .replace(/^(\s*)- --listen=:9443$/, '$1- --listen=:{{ .Values.webhook.port }}')
      .replace(/^(\s*)containerPort: 9443$/, '$1containerPort: {{ .Values.webhook.port }}')
      .replace(/^(\s*)enableServiceLinks: false$/, '$1enableServiceLinks: false\n$1{{- if .Values.webhook.hostNetwork }}\n$1hostNetwork: true\n' +
        '$1dnsPolicy: {{ .Values.webhook.dnsPolicy | default "ClusterFirstWithHostNet" }}\n$1{{- else if .Values.webhook.dnsPolicy }}\n$1dnsPolicy: {{ .Values.webhook.dnsPolicy }}\n$1{{- end }}');
  }).join('\n')
    // The pod template's labels and annotations, placement and resources from webhook.* values.
    .replace(/^( {6})labels:\n( {8})app\.kubernetes\.io\/name: ownerrefs-webhook\n/m,
      '$1labels:\n$2app.kubernetes.io/name: ownerrefs-webhook\n$2{{- with .Values.webhook.podLabels }}\n$2{{- toYaml . | nindent 8 }}\n$2{{- end }}\n' +
      '$1{{- with .Values.webhook.podAnnotations }}\n$1annotations:\n$2{{- toYaml . | nindent 8 }}\n$1{{- end }}\n')
    .replace(/^( {6})serviceAccountName: ownerrefs-webhook\n/m,
      '$1serviceAccountName: ownerrefs-webhook\n$1{{- with include "ownerrefs.imagePullSecrets" . }}\n$1imagePullSecrets:\n$1{{- . | nindent 6 }}\n$1{{- end }}\n')
    .replace(/^( {6})enableServiceLinks: false\n/m,
      '$1{{- with .Values.webhook.nodeSelector }}\n$1nodeSelector:\n$1  {{- toYaml . | nindent 8 }}\n$1{{- end }}\n' +
      '$1{{- with .Values.webhook.affinity }}\n$1affinity:\n$1  {{- toYaml . | nindent 8 }}\n$1{{- end }}\n' +
      '$1{{- with .Values.webhook.tolerations }}\n$1tolerations:\n$1{{- toYaml . | nindent 6 }}\n$1{{- end }}\n$1enableServiceLinks: false\n')
    // webhook.yaml's spread over nodes is the value's default.
    .replace(/^( {6})topologySpreadConstraints:\n(?: {6}[- ] .*\n)+/m,
      '$1{{- with .Values.webhook.topologySpreadConstraints }}\n$1topologySpreadConstraints:\n$1{{- toYaml . | nindent 6 }}\n$1{{- end }}\n')
    .replace(/^( {8})resources:\n {10}requests: \{cpu: 20m, memory: 96Mi\}\n {10}limits: \{memory: 256Mi\}\n/m,
      '$1resources:\n$1  {{- toYaml .Values.webhook.resources | nindent 10 }}\n');
  const SELF = 'eq .Values.webhook.tls.mode "selfManaged"';
  const withTls = body
    // Flags: TLS from a mounted Secret (not self-managed), the kinds followed, extraArgs.
    .replace(/^( {8})- --health-addr=:8081\n/m, '$1- --health-addr=:8081\n' +
      `$1{{- if not (${SELF}) }}\n$1- --tls-cert-file=/etc/webhook-tls/tls.crt\n$1- --tls-key-file=/etc/webhook-tls/tls.key\n$1{{- end }}\n` +
      '$1{{- with .Values.followOwners.extraKinds }}\n$1- --follow-kinds={{ join "," . }}\n$1{{- end }}\n' +
      '$1{{- with .Values.webhook.extraArgs }}\n$1{{- toYaml . | nindent 8 }}\n$1{{- end }}\n')
    // The mounted Secret: cert-manager's, or the user's own.
    .replace(/^( {12})drop: \[ALL\]\n/m, '$1drop: [ALL]\n' +
      `        {{- if not (${SELF}) }}\n        volumeMounts:\n        - {name: tls, mountPath: /etc/webhook-tls, readOnly: true}\n` +
      '      volumes:\n      - name: tls\n        secret:\n          secretName: {{ if eq .Values.webhook.tls.mode "certManager" }}ownerrefs-webhook-cert{{ else }}{{ required "webhook.tls.existingSecret: the Secret with tls.crt and tls.key" .Values.webhook.tls.existingSecret }}{{ end }}\n' +
      '        {{- end }}\n')
    // The caBundle: the user's, or cert-manager's CA injector's.
    .replace(/^( {8})port: 443\n( {4}namespaceSelector:)/gm, '$1port: 443\n      {{- if eq .Values.webhook.tls.mode "existingSecret" }}\n' +
      '      caBundle: {{ required "webhook.tls.caBundle: the CA that signed the Secret\'s certificate, PEM in base64" .Values.webhook.tls.caBundle }}\n      {{- end }}\n$2');
  const docs = withTls.trimEnd().split('\n---\n').map(withExtraMetadata).map((doc) => {
    if (/^kind: PodDisruptionBudget$/m.test(doc)) return `{{- if gt (int .Values.webhook.replicas) 1 }}\n${doc}\n{{- end }}`;
    // Self-managed TLS only: the Secret and the caBundle it keeps.
    if (/^kind: (Role|RoleBinding|ClusterRole|ClusterRoleBinding)$/m.test(doc)) return `{{- if ${SELF} }}\n${doc}\n{{- end }}`;
    if (/^kind: MutatingWebhookConfiguration$/m.test(doc)) {
      // cert-manager's CA injector reads its annotation beside the extra ones, in one map: two
      // annotations keys are one too many for a YAML parser, which keeps only one of them.
      const extra = '  {{- with .Values.extraAnnotations }}\n  annotations:\n';
      if (!doc.includes(extra)) throw new Error('webhook.yaml: the MutatingWebhookConfiguration has no extraAnnotations block');
      return doc.replace(extra, '  {{- $annotations := deepCopy (.Values.extraAnnotations | default (dict)) }}\n' +
        '  {{- if eq .Values.webhook.tls.mode "certManager" }}\n' +
        '  {{- $_ := set $annotations "cert-manager.io/inject-ca-from" (printf "%s/ownerrefs-webhook" (include "ownerrefs.namespace" .)) }}\n' +
        '  {{- end }}\n  {{- with $annotations }}\n  annotations:\n');
    }
    return doc;
  });
  return `{{- if include "ownerrefs.admission.webhook" . }}\n# Generated from webhook.yaml by scripts/gen-manifests.ts.\n${docs.join('\n---\n')}\n{{- end }}\n`;
}

/** The chart's template of the agent's ValidatingAdmissionPolicy and its binding (agent/manifests/agentpolicy.ts). */
export function agentPolicyTemplate(): string {
  const NS = 'NAMESPACE-PLACEHOLDER';
  const docs = [...agentPolicy(NS), ...annotationWritersPolicy(NS)].map((o) => withExtraMetadata(stringify(o, { lineWidth: 0, aliasDuplicateObjects: false }).trimEnd()).replaceAll(NS, '{{ include "ownerrefs.namespace" . }}'));
  return `# Generated from agent/manifests/agentpolicy.ts and writerspolicy.ts by scripts/gen-manifests.ts.
# The agent may patch pods (the annotations the KEP's syntax reads); the first policy bounds
# that to those annotations, on pods of its own node; the second lets no one else change them.
# SECURITY.md.
${docs.join('\n---\n')}
`;
}

/** The chart's template of KEP-4753's mitigation (agent/manifests/forbidpolicy.ts), when forbidReading.enabled. */
export function forbidPolicyTemplate(): string {
  const LABEL = 'LABEL-PLACEHOLDER';
  const docs = forbidReadingPolicy(LABEL).map((o) => withExtraMetadata(stringify(o, { lineWidth: 0, aliasDuplicateObjects: false }).trimEnd())
    .replaceAll(LABEL, '{{ .Values.forbidReading.namespaceLabel }}'));
  return `{{- if .Values.forbidReading.enabled }}
# Generated from agent/manifests/forbidpolicy.ts by scripts/gen-manifests.ts.
${docs.join('\n---\n')}
{{- end }}
`;
}

const yamlOf = (o: unknown) => stringify(o, { lineWidth: 0, aliasDuplicateObjects: false }).trimEnd();

/** Policy mode's objects: the MutatingAdmissionPolicies and bindings, then the gate's lifter, its RBAC and its bounding policy, in `namespace`. */
const policyModeObjects = (namespace: string, image: string) => [...admissionPolicies(), ...gatePolicy(namespace), ...gateObjects(namespace, image)];

/** admission-policy.yaml: policy mode's objects (agent/admission/policy/policy.ts, agent/manifests/gate.ts), for kubectl apply. */
export function admissionPolicyYaml(): string {
  return `# Generated from agent/admission/policy/policy.ts and agent/manifests/gate.ts by scripts/gen-manifests.ts: do not edit.
# KEP-4753's own syntax admitted by the API server itself (Kubernetes 1.36 and later), with
# no process of ours in the pod-creation path: the chart's admission.mode=policy. A pod that
# reads its workload's values waits, gated, until the ownerrefs-gate Deployment has written
# them (daemonset.yaml makes its namespace).
#
#   kubectl apply -f admission-policy.yaml
#
${policyModeObjects(WEBHOOK_NAMESPACE, `ghcr.io/ownerrefs-dev/ownerrefs-agent:${agentVersion()}`).map(yamlOf).join('\n---\n')}
`;
}

/** `doc` with each replacement made; one that matches nothing is an error (the builder's shape changed). */
function required(doc: string, edits: readonly [RegExp, string][]): string {
  return edits.reduce((d, [re, to]) => {
    if (!re.test(d)) throw new Error(`gen-manifests: the gate's Deployment has no match for ${re}`);
    return d.replace(re, to);
  }, doc);
}

/** The chart's template of the same objects, when admission.mode is policy or both (or auto on 1.36+). */
export function admissionPolicyTemplate(): string {
  const NS = 'NAMESPACE-PLACEHOLDER';
  const IMAGE = 'IMAGE-PLACEHOLDER';
  const docs = policyModeObjects(NS, IMAGE).map((o) => withExtraMetadata(yamlOf(o))
    .replaceAll(NS, '{{ include "ownerrefs.namespace" . }}')
    .replace(`image: ${IMAGE}`, 'image: {{ include "ownerrefs.image" . }}')
    .replace(/^(\s*)imagePullPolicy: IfNotPresent$/m, '$1imagePullPolicy: {{ .Values.image.pullPolicy }}')
    .replace(/^(\s*)value: info$/m, '$1value: {{ .Values.logLevel }}'))
    // The gate's Deployment from gate.* values: replicas, priority, pull secrets, placement, resources, flags.
    .map((doc) => !/^kind: Deployment$/m.test(doc) ? doc : required(doc, [
      [/^( {2})replicas: \d+$/m, '$1replicas: {{ .Values.gate.replicas }}'],
      [/^( {6})serviceAccountName: (\S+)\n\s*priorityClassName: \S+\n/m,
        '$1serviceAccountName: $2\n$1{{- with .Values.gate.priorityClassName }}\n$1priorityClassName: {{ . }}\n$1{{- end }}\n' +
        '$1{{- with include "ownerrefs.imagePullSecrets" . }}\n$1imagePullSecrets:\n$1  {{- . | nindent 8 }}\n$1{{- end }}\n' +
        '$1{{- with .Values.gate.nodeSelector }}\n$1nodeSelector:\n$1  {{- toYaml . | nindent 8 }}\n$1{{- end }}\n' +
        '$1{{- with .Values.gate.affinity }}\n$1affinity:\n$1  {{- toYaml . | nindent 8 }}\n$1{{- end }}\n' +
        '$1{{- with .Values.gate.tolerations }}\n$1tolerations:\n$1  {{- toYaml . | nindent 8 }}\n$1{{- end }}\n'],
      [/^( {12})- --health-addr=:8081\n/m, '$1- --health-addr=:8081\n$1{{- with .Values.gate.extraArgs }}\n$1{{- toYaml . | nindent 12 }}\n$1{{- end }}\n'],
      [/^( {10})resources:\n(?: {12}.*\n)+/m, '$1resources:\n$1  {{- toYaml .Values.gate.resources | nindent 12 }}\n'],
    ]));
  return `{{- if include "ownerrefs.admission.policy" . }}
# Generated from agent/admission/policy/policy.ts and agent/manifests/gate.ts by scripts/gen-manifests.ts.
${docs.join('\n---\n')}
{{- end }}
`;
}

if (import.meta.main) {
  writeFileSync(path.join(ROOT, 'admission-policy.yaml'), admissionPolicyYaml());
  writeFileSync(path.join(CHART, 'templates', 'admission-policy.yaml'), admissionPolicyTemplate());
  writeFileSync(path.join(CHART, 'templates', 'webhook.yaml'), webhookTemplate());
  writeFileSync(path.join(CHART, 'templates', 'agent-policy.yaml'), agentPolicyTemplate());
  writeFileSync(path.join(CHART, 'templates', 'forbid-policy.yaml'), forbidPolicyTemplate());
  const helm = helmBin();
  writeFileSync(path.join(ROOT, 'daemonset.yaml'), daemonsetYaml(helm));
  writeFileSync(path.join(ROOT, 'rbac-follow-owners.yaml'), followOwnersYaml(helm));
}
