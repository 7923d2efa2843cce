// The Helm chart, with the real helm (built from Go modules, cached: localcluster/tools).
// The plain manifests are its renderings; bad values are refused by values.schema.json.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { chartReadme } from '../../scripts/gen-chart-readme.ts';
import { admissionPolicyTemplate, admissionPolicyYaml, agentPolicyTemplate, CHART, daemonsetYaml, followOwnersYaml, forbidPolicyTemplate, helmBin, helmTemplate, webhookTemplate } from '../../scripts/gen-manifests.ts';
import { MATRIX } from '../support/chart.ts';
import { NODE_FLAGS_OPTIMIZING } from '../../agent/config.ts';
import { policyName } from '../../agent/admission/policy/policy.ts';
import { WEBHOOK_CONFIG_NAME } from '../../projections/names.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const objects = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJS() as Obj).filter(Boolean);
/** The objects of a rendering, refusing what a YAML parser would read differently: a duplicate key keeps only one of its values. */
function strictObjects(yaml: string): Obj[] {
  const docs = parseAllDocuments(yaml, { uniqueKeys: true });
  if (!Array.isArray(docs)) throw new Error('not a YAML stream');
  const errors = docs.flatMap((d) => d.errors.map((e) => `${e.code}: ${e.message}`));
  if (errors.length > 0) throw new Error(errors.join('\n'));
  return docs.map((d) => d.toJS() as Obj).filter(Boolean);
}
let helm: string;

beforeAll(() => { helm = helmBin(); }, 600_000);

describe('the chart', () => {
  it('passes helm lint --strict, with every switch on', () => {
    const r = spawnSync(helm, ['lint', '--strict', CHART, '--set', 'webhook.enabled=true', '--set', 'followOwners.rbac=true'], { encoding: 'utf8' });
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it('renders daemonset.yaml, rbac-follow-owners.yaml and its webhook, agent-policy and forbid-policy templates exactly (npm run gen:manifests)', () => {
    expect(read('daemonset.yaml')).toBe(daemonsetYaml(helm));
    expect(read('rbac-follow-owners.yaml')).toBe(followOwnersYaml(helm));
    expect(read('charts/ownerrefs-agent/templates/webhook.yaml')).toBe(webhookTemplate());
    expect(read('charts/ownerrefs-agent/templates/agent-policy.yaml')).toBe(agentPolicyTemplate());
    expect(read('charts/ownerrefs-agent/templates/forbid-policy.yaml')).toBe(forbidPolicyTemplate());
    expect(read('admission-policy.yaml')).toBe(admissionPolicyYaml());
    expect(read('charts/ownerrefs-agent/templates/admission-policy.yaml')).toBe(admissionPolicyTemplate());
  });

  const MAP_API = 'admissionregistration.k8s.io/v1/MutatingAdmissionPolicy';
  const admissionKinds = (args: string[]) => [...new Set(objects(helmTemplate(helm, args)).map((o) => o.kind)
    .filter((k) => /^Mutating|^Deployment$/.test(k)))].sort();
  it.each([
    ['none by default', [], []],
    ['policy: the policies and bindings, and the gate\'s lifter (a Deployment), no webhook', ['--set', 'admission.mode=policy'], ['Deployment', 'MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding']],
    ['webhook', ['--set', 'admission.mode=webhook'], ['Deployment', 'MutatingWebhookConfiguration']],
    ['webhook.enabled=true, as mode webhook', ['--set', 'webhook.enabled=true'], ['Deployment', 'MutatingWebhookConfiguration']],
    ['both, the step from webhook to policy: the two together', ['--set', 'admission.mode=both'], ['Deployment', 'MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding', 'MutatingWebhookConfiguration']],
    ['auto on an API server without MutatingAdmissionPolicy v1: the webhook', ['--set', 'admission.mode=auto'], ['Deployment', 'MutatingWebhookConfiguration']],
    ['auto on one that serves it: the policies and the gate\'s lifter', ['--set', 'admission.mode=auto', '--api-versions', MAP_API], ['Deployment', 'MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding']],
  ])('admission.mode, %s', (_what, args, kinds) => {
    expect(admissionKinds(args)).toEqual(kinds);
  });

  it('admission.mode: the policy objects are admission-policy.yaml\'s', () => {
    // Helm orders a template's objects by kind.
    const byKind = (objs: Obj[]) => [...objs].sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));
    const rendered = objects(helmTemplate(helm, ['--set', 'admission.mode=policy', '--show-only', 'templates/admission-policy.yaml']));
    expect(byKind(rendered)).toEqual(byKind(objects(read('admission-policy.yaml'))));
  });

  it('admission.mode: the guards against a one-step switch, each way, look up the objects the webhook and the policies install, by their names in names.ts', () => {
    const looked = [...read('charts/ownerrefs-agent/templates/_helpers.tpl').matchAll(/lookup "[^"]*" "(\w+)" "" "([^"]+)"/g)].map(([, kind, name]) => `${kind}/${name}`);
    const both = [`MutatingWebhookConfiguration/${WEBHOOK_CONFIG_NAME}`, `MutatingAdmissionPolicyBinding/${policyName('pods')}`];
    expect(looked).toEqual([...both, ...both]);
  });

  it.each([
    { what: 'image.registry (a mirror): the registry replaced, the path kept', args: ['--set', 'image.registry=mirror.example.com:5000'], image: 'mirror.example.com:5000/ownerrefs-dev/ownerrefs-agent:0.1.0' },
    { what: 'global.imageRegistry wins over image.registry', args: ['--set', 'image.registry=a.example', '--set', 'global.imageRegistry=b.example/team'], image: 'b.example/team/ownerrefs-dev/ownerrefs-agent:0.1.0' },
    { what: 'a repository without a registry gets one', args: ['--set', 'image.repository=ownerrefs/agent', '--set', 'global.imageRegistry=mirror.example'], image: 'mirror.example/ownerrefs/agent:0.1.0' },
    { what: 'a digest beside a mirror', args: ['--set', 'global.imageRegistry=mirror.example', '--set', `image.digest=sha256:${'a'.repeat(64)}`], image: `mirror.example/ownerrefs-dev/ownerrefs-agent@sha256:${'a'.repeat(64)}` },
  ])('as a subchart or behind a mirror, $what: every pod of every mode pulls it, with the global pull secrets first', ({ args, image }) => {
    for (const mode of ['webhook', 'policy']) {
      const pods = objects(helmTemplate(helm, [...args, '--set', `admission.mode=${mode}`, '--set-json', 'global.imagePullSecrets=[{"name":"parent"}]', '--set-json', 'imagePullSecrets=[{"name":"own"}]',
        '--set', 'enabled=true', '--set', 'global.somethingElse=x']))
        .filter((o) => o.kind === 'DaemonSet' || o.kind === 'Deployment').map((o) => o.spec.template.spec);
      expect(pods.length).toBeGreaterThanOrEqual(2);
      for (const pod of pods) {
        expect(pod.containers.map((c: Obj) => c.image)).toEqual(pod.containers.map(() => image));
        expect(pod.imagePullSecrets).toEqual([{ name: 'parent' }, { name: 'own' }]);
      }
    }
  });

  it('webhook.port, hostNetwork (with its dnsPolicy), failurePolicy and timeoutSeconds reach the Deployment, the configuration and the NetworkPolicy', () => {
    const objs = objects(helmTemplate(helm, ['--set', 'admission.mode=webhook', '--set', 'webhook.port=10250', '--set', 'webhook.hostNetwork=true', '--set', 'webhook.failurePolicy=Ignore',
      '--set', 'webhook.timeoutSeconds=2', '--set', 'webhook.networkPolicy.enabled=true', '--set-json', 'webhook.networkPolicy.apiServerCIDRs=["10.0.0.0/8"]']));
    const pod = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'ownerrefs-webhook')!.spec.template.spec;
    expect({ hostNetwork: pod.hostNetwork, dnsPolicy: pod.dnsPolicy, listen: pod.containers[0].args.filter((a: string) => a.startsWith('--listen=')),
      port: pod.containers[0].ports.find((p: Obj) => p.name === 'https').containerPort })
      .toEqual({ hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet', listen: ['--listen=:10250'], port: 10250 });
    const hooks = objs.filter((o) => o.kind === 'MutatingWebhookConfiguration').flatMap((o) => o.webhooks);
    expect(new Set(hooks.map((h: Obj) => `${h.failurePolicy}/${h.timeoutSeconds}`))).toEqual(new Set(['Ignore/2']));
    expect(objs.find((o) => o.kind === 'NetworkPolicy')!.spec.ingress[0].ports).toEqual([{ port: 10250, protocol: 'TCP' }]);
    // By default: the pod network, the cluster's DNS policy, and the plain YAML's port.
    const plain = objects(helmTemplate(helm, ['--set', 'admission.mode=webhook'])).find((o) => o.kind === 'Deployment' && o.metadata.name === 'ownerrefs-webhook')!.spec.template.spec;
    expect({ hostNetwork: plain.hostNetwork, dnsPolicy: plain.dnsPolicy }).toEqual({ hostNetwork: undefined, dnsPolicy: undefined });
  });

  it.each([
    { mode: 'webhook', components: ['ownerrefs-agent', 'ownerrefs-webhook'] },
    { mode: 'policy', components: ['ownerrefs-agent', 'ownerrefs-gate'] },
    { mode: 'both', components: ['ownerrefs-agent', 'ownerrefs-webhook', 'ownerrefs-gate'] },
  ])('monitoring.serviceMonitor in $mode mode: a headless Service on the health port of each installed component, selecting its pods, and one ServiceMonitor over them', ({ mode, components }) => {
    const objs = objects(helmTemplate(helm, ['--set', `admission.mode=${mode}`, '--set', 'monitoring.serviceMonitor.enabled=true', '--set', 'monitoring.labels.release=prom']));
    const services = objs.filter((o) => o.kind === 'Service' && o.metadata.labels?.['ownerrefs.dev/metrics'] === 'true');
    expect(services.map((o) => o.metadata.name)).toEqual(components.map((c) => `${c}-metrics`));
    const workloads = objs.filter((o) => o.kind === 'DaemonSet' || o.kind === 'Deployment');
    for (const svc of services) {
      expect(svc.spec.clusterIP).toBe('None');
      const target = workloads.find((w) => Object.entries(svc.spec.selector).every(([k, v]) => w.spec.template.metadata.labels[k] === v))!;
      const port = target.spec.template.spec.containers[0].ports.find((p: Obj) => p.name === 'http-health');
      expect({ port: svc.spec.ports[0].port, targetPort: svc.spec.ports[0].targetPort }).toEqual({ port: port.containerPort, targetPort: 'http-health' });
    }
    const monitor = objs.find((o) => o.kind === 'ServiceMonitor')!;
    expect(monitor.metadata.labels.release).toBe('prom');
    expect(monitor.spec).toEqual({ selector: { matchLabels: { 'ownerrefs.dev/metrics': 'true' } }, endpoints: [{ port: 'http-health', path: '/metrics', interval: '30s' }] });
    expect(objs.filter((o) => o.kind === 'PodMonitor')).toEqual([]);
  });

  it('admission.mode=both: the webhook fails open, since the policies admit on their own; webhook mode fails closed', () => {
    const policies = (mode: string) => objects(helmTemplate(helm, ['--set', `admission.mode=${mode}`, '--show-only', 'templates/webhook.yaml']))
      .filter((o) => o.kind === 'MutatingWebhookConfiguration').flatMap((o) => o.webhooks.map((w: Obj) => w.failurePolicy));
    expect(new Set(policies('both'))).toEqual(new Set(['Ignore']));
    expect(new Set(policies('webhook'))).toEqual(new Set(['Fail']));
  });

  it('places and sizes the gate\'s lifter from gate.* values, with the pull secrets, in policy mode', () => {
    const gate = objects(helmTemplate(helm, ['--set', 'admission.mode=policy', '--set', 'gate.replicas=3', '--set', 'gate.priorityClassName=',
      '--set', 'gate.nodeSelector.pool=system', '--set-json', 'gate.tolerations=[{"key":"dedicated","operator":"Exists"}]', '--set-json', 'gate.extraArgs=["--owner-budget-ms=5000"]',
      '--set', 'gate.resources.requests.cpu=50m', '--set-json', 'imagePullSecrets=[{"name":"mirror"}]'])).find((o) => o.kind === 'Deployment' && o.metadata.name === 'ownerrefs-gate')!;
    const pod = gate.spec.template.spec;
    expect({ replicas: gate.spec.replicas, priority: pod.priorityClassName, nodeSelector: pod.nodeSelector, tolerations: pod.tolerations, pullSecrets: pod.imagePullSecrets,
      args: pod.containers[0].args, resources: pod.containers[0].resources }).toEqual({ replicas: 3, priority: undefined, nodeSelector: { pool: 'system' },
      tolerations: [{ key: 'dedicated', operator: 'Exists' }], pullSecrets: [{ name: 'mirror' }], args: ['gate', '--health-addr=:8081', '--owner-budget-ms=5000'], resources: { requests: { cpu: '50m', memory: '80Mi' }, limits: { memory: '256Mi' } } });
  });

  it.each([
    ['two ways at once', ['--set', 'admission.mode=policy', '--set', 'webhook.enabled=true'], /webhook\.enabled=true and admission\.mode=policy: choose one/],
    ['a mode it does not know', ['--set', 'admission.mode=always'], /admission\/mode.*one of/],
  ])('admission.mode: refuses %s, naming the value', (_what, args, message) => {
    const r = spawnSync(helm, ['template', 'x', CHART, ...args], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(message);
  });

  it('renders webhook.yaml\'s objects when the webhook is on', () => {
    const byKind = (objs: Obj[]) => [...objs].sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));
    const rendered = objects(helmTemplate(helm, ['--set', 'webhook.enabled=true', '--show-only', 'templates/webhook.yaml']));
    expect(byKind(rendered)).toEqual(byKind(objects(read('webhook.yaml'))));
  });

  it.each(Object.entries(MATRIX))('renders with %s', (_name, args) => {
    const objs = objects(helmTemplate(helm, args));
    expect(objs.map((o) => o.kind)).toContain('DaemonSet');
  });

  it('moves every path with kubeletRootDir: no /var/lib/kubelet left anywhere in a microk8s rendering', () => {
    const text = helmTemplate(helm, MATRIX.microk8s!);
    expect(text.match(/(?<![\w.-])\/var\/lib\/kubelet/g)).toBeNull(); // the default root, as a path of its own
    const ds = objects(text).find((o) => o.kind === 'DaemonSet')!;
    const c = ds.spec.template.spec.containers[0];
    const root = '/var/snap/microk8s/common/var/lib/kubelet';
    expect(c.args).toEqual(['run', `--kubelet-root=${root}`, '--health-addr=:8080', `--csi-socket=${root}/plugins/ownerrefs.dev/csi.sock`, `--registration-dir=${root}/plugins_registry`]);
    expect(ds.spec.template.spec.volumes.map((v: Obj) => v.hostPath.path)).toEqual([`${root}/pods`, `${root}/plugins/ownerrefs.dev`, `${root}/plugins_registry`]);
    expect(c.volumeMounts.map((m: Obj) => m.mountPath)).toEqual([`${root}/pods`, `${root}/plugins/ownerrefs.dev`, `${root}/plugins_registry`]);
  });

  it('drops every CSI part when CSI is off', () => {
    const objs = objects(helmTemplate(helm, MATRIX['emptyDir only (CSI off)']!));
    expect(objs.map((o) => o.kind)).not.toContain('CSIDriver');
    const ds = objs.find((o) => o.kind === 'DaemonSet')!;
    expect(ds.spec.template.spec.volumes.map((v: Obj) => v.name)).toEqual(['kubelet-pods']);
    expect(ds.spec.template.spec.containers[0].args.join(' ')).not.toMatch(/csi|registration/);
  });

  it('adds a followed custom kind to the RBAC and to the agent\'s flags', () => {
    const objs = objects(helmTemplate(helm, MATRIX['following owners on, with a custom kind']!));
    const role = objs.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'ownerrefs-agent-follow-owners')!;
    expect(role.rules.at(-1)).toEqual({ apiGroups: ['argoproj.io'], resources: ['rollouts'], verbs: ['get'] });
    expect(objs.find((o) => o.kind === 'DaemonSet')!.spec.template.spec.containers[0].args).toContain('--follow-kinds=argoproj.io/v1alpha1/Rollout=rollouts');
  });

  it("leaves the image's ENTRYPOINT (NODE_FLAGS) by default, and with v8.optimizingCompilers runs it without --no-opt --no-maglev", () => {
    const containerOf = (args: string[]) => objects(helmTemplate(helm, args)).find((o) => o.kind === 'DaemonSet')!.spec.template.spec.containers[0];
    expect(containerOf(MATRIX.defaults!).command).toBeUndefined();
    const on = containerOf(MATRIX["V8's optimising compilers on"]!);
    const entry = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(read('Dockerfile'))![1]!) as string[];
    expect(on.command).toEqual(['node', ...NODE_FLAGS_OPTIMIZING, 'dist/agent/main.js']);
    expect(on.command.at(-1)).toBe(entry.at(-1)); // the same program, relative to the image's WORKDIR
    expect(on.args).toEqual(containerOf(MATRIX.defaults!).args);
  });

  it('pins the image by digest when given, and carries the extra labels', () => {
    const objs = objects(helmTemplate(helm, MATRIX['namespace not created, pinned digest, extras']!));
    const ds = objs.find((o) => o.kind === 'DaemonSet')!;
    expect(ds.spec.template.spec.containers[0].image).toBe(`ghcr.io/ownerrefs-dev/ownerrefs-agent@sha256:${'a'.repeat(64)}`);
    expect(ds.metadata.labels.team).toBe('platform');
    expect(ds.spec.template.metadata.annotations).toEqual({ note: 'x' });
    expect(ds.spec.template.spec.priorityClassName).toBeUndefined();
    expect(objs.map((o) => o.kind)).not.toContain('Namespace');
  });

  it('puts extraLabels and extraAnnotations on every object it renders, the webhook\'s, the follow-owners RBAC\'s and the monitoring objects\' included', () => {
    const objs = objects(helmTemplate(helm, ['--set', 'webhook.enabled=true', '--set', 'followOwners.rbac=true', '--set', 'monitoring.podMonitor.enabled=true',
      '--set', 'monitoring.prometheusRule.enabled=true', '--set', 'monitoring.labels.release=prom', '--set', 'extraLabels.team=platform',
      '--set', 'extraAnnotations.owner=platform-team']));
    expect(objs.map((o) => o.kind)).toEqual(expect.arrayContaining(['PodMonitor', 'PrometheusRule', 'MutatingWebhookConfiguration', 'ClusterRoleBinding']));
    const missing = objs.filter((o) => o.metadata.labels?.team !== 'platform' || o.metadata.annotations?.owner !== 'platform-team').map((o) => `${o.kind}/${o.metadata.name}`);
    expect(missing).toEqual([]);
  });

  it('has a README whose values table is values.schema.json and values.yaml (npm run gen:chart-readme)', () => {
    expect(read('charts/ownerrefs-agent/README.md')).toBe(chartReadme());
    for (const key of ['webhook.tls.mode', 'extraArgs', 'criticalPodsQuota.enabled', 'forbidReading.namespaceLabel']) expect(chartReadme()).toContain(`| \`${key}\` |`);
  });

  it('passes extraArgs to the agent and the webhook, after their own flags', () => {
    const objs = objects(helmTemplate(helm, ['--set', 'webhook.enabled=true', '--set', 'extraArgs[0]=--owner-refresh-seconds=120', '--set', 'webhook.extraArgs[0]=--owner-budget-ms=500']));
    expect(objs.find((o) => o.kind === 'DaemonSet')!.spec.template.spec.containers[0].args.at(-1)).toBe('--owner-refresh-seconds=120');
    expect(objs.find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0].args.at(-1)).toBe('--owner-budget-ms=500');
    expect(spawnSync(helm, ['template', 'x', CHART, '--set', 'extraArgs[0]=owner-refresh'], { encoding: 'utf8' }).stderr).toMatch(/extraArgs/);
  });

  it.each([
    { mode: 'selfManaged', args: [], secret: undefined, tlsRbac: true },
    { mode: 'certManager', args: ['--set', 'webhook.tls.mode=certManager'], secret: 'ownerrefs-webhook-cert', tlsRbac: false },
    { mode: 'existingSecret', args: ['--set', 'webhook.tls.mode=existingSecret', '--set', 'webhook.tls.existingSecret=my-tls', '--set', 'webhook.tls.caBundle=Y2E='], secret: 'my-tls', tlsRbac: false },
  ])('webhook TLS $mode: the flags, the mounted Secret, the caBundle\'s source, and the RBAC only self-managed TLS needs', ({ mode, args, secret, tlsRbac }) => {
    const objs = objects(helmTemplate(helm, ['--set', 'webhook.enabled=true', ...args]));
    const pod = objs.find((o) => o.kind === 'Deployment')!.spec.template.spec;
    expect(pod.containers[0].args.includes('--tls-cert-file=/etc/webhook-tls/tls.crt')).toBe(secret !== undefined);
    expect(pod.volumes?.[0]?.secret?.secretName).toBe(secret);
    expect(objs.some((o) => o.kind === 'Role' && o.metadata.name === 'ownerrefs-webhook')).toBe(tlsRbac);
    const config = objs.find((o) => o.kind === 'MutatingWebhookConfiguration')!;
    expect(config.metadata.annotations?.['cert-manager.io/inject-ca-from']).toBe(mode === 'certManager' ? 'ownerrefs-system/ownerrefs-webhook' : undefined);
    expect(config.webhooks.map((w: Obj) => w.clientConfig.caBundle)).toEqual(config.webhooks.map(() => (mode === 'existingSecret' ? 'Y2E=' : undefined)));
    expect(objs.some((o) => o.kind === 'Certificate')).toBe(mode === 'certManager');
  });

  // Every TLS mode with every combination of extra metadata, parsed by a YAML parser that refuses duplicate keys:
  // the API server's keeps one of two annotations maps, and cert-manager's CA injector would lose its own.
  const TLS_MODES: Record<string, string[]> = {
    selfManaged: [],
    certManager: ['--set', 'webhook.tls.mode=certManager'],
    "certManager with the cluster's issuer": ['--set', 'webhook.tls.mode=certManager', '--set', 'webhook.tls.certManager.issuerRef.name=corp-ca',
      '--set', 'webhook.tls.certManager.issuerRef.kind=ClusterIssuer', '--set', 'webhook.tls.certManager.issuerRef.group=cert-manager.io'],
    existingSecret: ['--set', 'webhook.tls.mode=existingSecret', '--set', 'webhook.tls.existingSecret=my-tls', '--set', 'webhook.tls.caBundle=Y2E='],
  };
  const EXTRAS = { 'no extras': { labels: false, annotations: false }, 'extraLabels only': { labels: true, annotations: false },
    'extraAnnotations only': { labels: false, annotations: true }, 'extraLabels and extraAnnotations': { labels: true, annotations: true } };
  it.each(Object.entries(TLS_MODES).flatMap(([mode, tls]) => Object.entries(EXTRAS).map(([extras, on]) => ({ mode, tls, extras, ...on }))))(
    'renders webhook TLS $mode with $extras without a duplicate key, the CA injector\'s annotation beside the extra one', ({ mode, tls, labels, annotations }) => {
      const args = ['--set', 'webhook.enabled=true', ...tls, ...(labels ? ['--set', 'extraLabels.team=platform'] : []), ...(annotations ? ['--set', 'extraAnnotations.a=b'] : [])];
      const objs = strictObjects(helmTemplate(helm, args));
      const config = objs.find((o) => o.kind === 'MutatingWebhookConfiguration')!;
      expect(config.metadata.annotations).toEqual(mode.startsWith('certManager') || annotations ? {
        ...(mode.startsWith('certManager') ? { 'cert-manager.io/inject-ca-from': 'ownerrefs-system/ownerrefs-webhook' } : {}),
        ...(annotations ? { a: 'b' } : {}),
      } : undefined);
      expect(config.metadata.labels).toEqual({ 'app.kubernetes.io/name': 'ownerrefs-webhook', ...(labels ? { team: 'platform' } : {}) });
      const without = objs.filter((o) => (labels && o.metadata.labels?.team !== 'platform') || (annotations && o.metadata.annotations?.a !== 'b')).map((o) => `${o.kind}/${o.metadata.name}`);
      expect(without).toEqual([]);
    });

  it('keeps cert-manager\'s annotation when extraAnnotations names the same key', () => {
    const objs = strictObjects(helmTemplate(helm, ['--set', 'webhook.enabled=true', '--set', 'webhook.tls.mode=certManager',
      '--set', 'extraAnnotations.cert-manager\\.io/inject-ca-from=elsewhere/other']));
    expect(objs.find((o) => o.kind === 'MutatingWebhookConfiguration')!.metadata.annotations).toEqual({ 'cert-manager.io/inject-ca-from': 'ownerrefs-system/ownerrefs-webhook' });
  });

  it('refuses existingSecret mode without the Secret or the CA, saying which', () => {
    const r = spawnSync(helm, ['template', 'x', CHART, '--set', 'webhook.enabled=true', '--set', 'webhook.tls.mode=existingSecret', '--set', 'webhook.tls.existingSecret=s'], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/webhook\.tls\.caBundle: the CA that signed the Secret's certificate/);
  });

  it('makes a ResourceQuota that admits critical priority classes in its namespace, unless switched off', () => {
    const quota = objects(helmTemplate(helm)).find((o) => o.kind === 'ResourceQuota')!;
    expect(quota.spec.scopeSelector.matchExpressions[0]).toEqual({ operator: 'In', scopeName: 'PriorityClass', values: ['system-node-critical', 'system-cluster-critical'] });
    expect(objects(helmTemplate(helm, ['--set', 'criticalPodsQuota.enabled=false'])).some((o) => o.kind === 'ResourceQuota')).toBe(false);
  });

  it('puts the agents\' writes in a priority level of their own, for the release\'s namespace, with the shares and queue it is given, unless switched off', () => {
    const objs = objects(helmTemplate(helm, ['--set', 'namespace.name=infra', '--set', 'apiPriority.nominalConcurrencyShares=25', '--set', 'apiPriority.queueLengthLimit=64']));
    const level = objs.find((o) => o.kind === 'PriorityLevelConfiguration')!;
    expect(level.spec.limited).toMatchObject({ nominalConcurrencyShares: 25, borrowingLimitPercent: 0, limitResponse: { type: 'Queue', queuing: { queues: 1, handSize: 1, queueLengthLimit: 64 } } });
    const schema = objs.find((o) => o.kind === 'FlowSchema')!;
    expect(schema.spec.priorityLevelConfiguration.name).toBe(level.metadata.name);
    expect(schema.spec.matchingPrecedence).toBeLessThan(9000); // before the built-in service-accounts schema
    expect(schema.spec.rules).toEqual([{ subjects: [{ kind: 'ServiceAccount', serviceAccount: { name: 'ownerrefs-agent', namespace: 'infra' } }],
      resourceRules: [expect.objectContaining({ verbs: expect.not.arrayContaining(['get', 'list', 'watch', '*']) })] }]);
    expect(objects(helmTemplate(helm, ['--set', 'apiPriority.enabled=false'])).filter((o) => /FlowSchema|PriorityLevel/.test(o.kind))).toEqual([]);
  });

  it('installs the webhook without CSI mode (the kubelet renders the KEP syntax from annotations)', () => {
    const objs = objects(helmTemplate(helm, ['--set', 'webhook.enabled=true', '--set', 'csi.enabled=false']));
    expect(objs.some((o) => o.kind === 'MutatingWebhookConfiguration')).toBe(true);
    expect(objs.some((o) => o.kind === 'CSIDriver')).toBe(false);
  });

  it('runs the agent on every Linux node by default, tolerating every taint, and on a label when one is named', () => {
    const ds = (...args: string[]) => objects(helmTemplate(helm, args)).find((o) => o.kind === 'DaemonSet')!.spec.template.spec;
    expect(ds().nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
    expect(ds().tolerations).toEqual([{ operator: 'Exists' }]);
    expect(ds('--set', 'nodeSelectorLabel=ownerrefs.dev/agent').nodeSelector).toEqual({ 'kubernetes.io/os': 'linux', 'ownerrefs.dev/agent': 'true' });
  });

  const ARCH = { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64'] };
  const NOT_VK = { key: 'type', operator: 'NotIn', values: ['virtual-kubelet'] };
  const required = (...terms: Obj[]) => ({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } });
  it.each([
    ['no image pull secret by default', [], (p: Obj) => p.imagePullSecrets, undefined],
    ['imagePullSecrets', ['--set', 'imagePullSecrets[0].name=regcred'], (p: Obj) => p.imagePullSecrets, [{ name: 'regcred' }]],
    ['nodeSelector, beside kubernetes.io/os', ['--set', 'nodeSelector.pool=system'], (p: Obj) => p.nodeSelector, { 'kubernetes.io/os': 'linux', pool: 'system' }],
    ['nodeSelector and nodeSelectorLabel naming the same label (one key)', ['--set-string', 'nodeSelector.ownerrefs\\.dev/agent=true', '--set', 'nodeSelectorLabel=ownerrefs.dev/agent'],
      (p: Obj) => p.nodeSelector, { 'kubernetes.io/os': 'linux', 'ownerrefs.dev/agent': 'true' }],
    ['the default architectures, off virtual kubelets', [], (p: Obj) => p.affinity, required({ matchExpressions: [ARCH, NOT_VK] })],
    ['architectures', ['--set', 'architectures={amd64}'], (p: Obj) => p.affinity, required({ matchExpressions: [{ ...ARCH, values: ['amd64'] }, NOT_VK] })],
    ['excludeVirtualKubelet=false', ['--set', 'excludeVirtualKubelet=false'], (p: Obj) => p.affinity, required({ matchExpressions: [ARCH] })],
    ['a required node affinity: ours ANDed into each of its terms', ['--set-json', 'affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[' +
      '{"matchExpressions":[{"key":"pool","operator":"In","values":["a"]}]},{"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}]}]}}}'],
    (p: Obj) => p.affinity, required({ matchExpressions: [{ key: 'pool', operator: 'In', values: ['a'] }, ARCH, NOT_VK] },
      { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }], matchExpressions: [ARCH, NOT_VK] })],
    ['a preferred node affinity, kept beside ours', ['--set-json', 'affinity={"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"pool","operator":"In","values":["a"]}]}}]}}'],
      (p: Obj) => p.affinity.nodeAffinity, { ...required({ matchExpressions: [ARCH, NOT_VK] }).nodeAffinity,
        preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [{ key: 'pool', operator: 'In', values: ['a'] }] } }] }],
    ['tolerations', ['--set', 'tolerations[0].key=dedicated', '--set', 'tolerations[0].operator=Exists'], (p: Obj) => p.tolerations, [{ key: 'dedicated', operator: 'Exists' }]],
    ['the default seccomp profile of the pod', [], (p: Obj) => p.securityContext, { seccompProfile: { type: 'RuntimeDefault' } }],
    ['podSecurityContext', ['--set', 'podSecurityContext.seccompProfile.type=Localhost', '--set', 'podSecurityContext.seccompProfile.localhostProfile=profiles/agent.json',
      '--set', 'podSecurityContext.supplementalGroups={1000}', '--set', 'podSecurityContext.seLinuxOptions.level=s0'],
    (p: Obj) => p.securityContext, { seccompProfile: { type: 'Localhost', localhostProfile: 'profiles/agent.json' }, supplementalGroups: [1000], seLinuxOptions: { level: 's0' } }],
    ['securityContext: what the agent needs, with its own seccomp and AppArmor profiles', ['--set', 'securityContext.seccompProfile.type=Localhost',
      '--set', 'securityContext.seccompProfile.localhostProfile=profiles/agent.json', '--set', 'securityContext.appArmorProfile.type=RuntimeDefault', '--set', 'securityContext.runAsUser=0'],
    (p: Obj) => p.containers[0].securityContext, { runAsUser: 0, runAsGroup: 0, runAsNonRoot: false, privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'Localhost', localhostProfile: 'profiles/agent.json' }, appArmorProfile: { type: 'RuntimeDefault' } }],
  ] as [string, string[], (pod: Obj) => unknown, unknown][])('renders the agent pod\'s %s', (_what, args, pick, want) => {
    const pod = strictObjects(helmTemplate(helm, args)).find((o) => o.kind === 'DaemonSet')!.spec.template.spec;
    expect(pick(pod)).toEqual(want);
  });

  it.each([
    ['by default', [], { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '10%' } }],
    ['with maxUnavailable', ['--set', 'maxUnavailable=3'], { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 3 } }],
    ['OnDelete', ['--set', 'updateStrategy.type=OnDelete'], { type: 'OnDelete' }],
  ])('renders the agent\'s update strategy %s', (_what, args, want) => {
    expect(strictObjects(helmTemplate(helm, args)).find((o) => o.kind === 'DaemonSet')!.spec.updateStrategy).toEqual(want);
  });

  it('ships the agent\'s ValidatingAdmissionPolicy and binding for the release\'s namespace, and patch on pods in its role', () => {
    const objs = objects(helmTemplate(helm, ['--set', 'namespace.name=infra']));
    const policy = objs.find((o) => o.kind === 'ValidatingAdmissionPolicy')!;
    expect(policy.spec.matchConditions[0].expression).toBe("request.userInfo.username == 'system:serviceaccount:infra:ownerrefs-agent'");
    expect(objs.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding')!.spec).toEqual({ policyName: policy.metadata.name, validationActions: ['Deny'] });
    expect(objs.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'ownerrefs-agent')!.rules).toContainEqual({ apiGroups: [''], resources: ['pods'], verbs: ['patch'] });
  });

  // Every mode and option that adds namespaced objects or names the namespace in a string.
  const EVERYTHING = ['--set', 'webhook.enabled=true', '--set', 'followOwners.rbac=true', '--set', 'monitoring.podMonitor.enabled=true', '--set', 'monitoring.serviceMonitor.enabled=true',
    '--set', 'webhook.networkPolicy.enabled=true', '--set-json', 'webhook.networkPolicy.apiServerCIDRs=["10.0.0.0/8"]'];
  it.each([
    { what: 'helm without -n: namespace.name', args: [], ns: 'ownerrefs-system' },
    { what: 'the release\'s namespace (helm -n infra)', args: ['--namespace', 'infra'], ns: 'infra' },
    { what: 'namespaceOverride over the release\'s', args: ['--namespace', 'infra', '--set', 'namespaceOverride=platform'], ns: 'platform' },
    { what: 'namespace.name for a release in default', args: ['--namespace', 'default', '--set', 'namespace.name=agents'], ns: 'agents' },
  ])('puts every namespaced object, and every name of its ServiceAccounts, in $what', ({ args, ns }) => {
    for (const extra of [EVERYTHING, ['--set', 'admission.mode=policy', '--set', 'followOwners.rbac=true']]) {
      const text = helmTemplate(helm, [...args, ...extra]);
      const objs = objects(text);
      const namespaced = objs.filter((o) => !['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CSIDriver', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'MutatingAdmissionPolicy',
        'MutatingAdmissionPolicyBinding', 'MutatingWebhookConfiguration', 'PriorityLevelConfiguration', 'FlowSchema', 'PriorityClass'].includes(o.kind));
      expect(namespaced.length).toBeGreaterThan(3);
      expect(namespaced.filter((o) => o.metadata.namespace !== ns).map((o) => `${o.kind}/${o.metadata.name} in ${o.metadata.namespace}`)).toEqual([]);
      expect(objs.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name)).toEqual([ns]);
      // ServiceAccount subjects, the policies' usernames and the webhook's Service name the same namespace.
      expect([...text.matchAll(/system:serviceaccount:([a-z0-9-]+):/g)].map((m) => m[1]).filter((n) => n !== ns)).toEqual([]);
      for (const o of objs.filter((x) => ['ClusterRoleBinding', 'RoleBinding'].includes(x.kind))) {
        expect((o.subjects ?? []).filter((sub: { kind: string; namespace?: string }) => sub.kind === 'ServiceAccount' && sub.namespace !== ns)).toEqual([]);
      }
    }
  });

  it('refuses a namespaceOverride that is no DNS label', () => {
    expect(() => helmTemplate(helm, ['--set', 'namespaceOverride=Bad_Name'])).toThrow(/namespaceOverride/);
  });

  it('gives the webhook a PodDisruptionBudget only with more than one replica, and carries its priority class and the log level', () => {
    const render = (...args: string[]) => objects(helmTemplate(helm, ['--set', 'webhook.enabled=true', ...args]));
    const pdbs = (objs: Obj[]) => objs.filter((o) => o.kind === 'PodDisruptionBudget');
    expect(pdbs(render())).toHaveLength(1);
    const one = render('--set', 'webhook.replicas=1', '--set', 'webhook.priorityClassName=', '--set', 'logLevel=debug');
    expect(pdbs(one)).toEqual([]);
    const pod = one.find((o) => o.kind === 'Deployment')!.spec.template.spec;
    expect(pod.priorityClassName).toBeUndefined();
    expect(pod.containers[0].env).toContainEqual({ name: 'LOG_LEVEL', value: 'debug' });
  });

  it('renders the production preset: three replicas spread over zones, then nodes, with the PodDisruptionBudget, and no NetworkPolicy until given the API server\'s addresses', () => {
    const objs = objects(helmTemplate(helm, ['-f', path.join(CHART, 'values-production.yaml')]));
    const d = objs.find((o) => o.kind === 'Deployment')!;
    expect(d.spec.replicas).toBe(3);
    expect(d.spec.template.spec.topologySpreadConstraints.map((c: Obj) => c.topologyKey)).toEqual(['topology.kubernetes.io/zone', 'kubernetes.io/hostname']);
    expect(objs.find((o) => o.kind === 'PodDisruptionBudget')!.spec.minAvailable).toBe(1);
    expect(objs.filter((o) => o.kind === 'NetworkPolicy')).toEqual([]);
    const withPolicy = objects(helmTemplate(helm, ['-f', path.join(CHART, 'values-production.yaml'), '--set', 'webhook.networkPolicy.enabled=true',
      '--set', 'webhook.networkPolicy.apiServerCIDRs[0]=10.0.0.0/28', '--set', 'webhook.networkPolicy.apiServerCIDRs[1]=fd00::/64']));
    expect(withPolicy.find((o) => o.kind === 'NetworkPolicy')!.spec).toEqual({
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ownerrefs-webhook' } }, policyTypes: ['Ingress'],
      ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/28' } }, { ipBlock: { cidr: 'fd00::/64' } }], ports: [{ port: 9443, protocol: 'TCP' }] }, { ports: [{ port: 8081, protocol: 'TCP' }] }],
    });
    expect(d.spec.template.spec.containers[0].ports.map((p: Obj) => p.containerPort)).toEqual([9443, 8081]);
  });

  it('places and labels the webhook\'s pods from webhook.* values, not from the agent\'s (whose toleration of every taint would be wrong for a Deployment)', () => {
    const webhookPod = (...args: string[]) => objects(helmTemplate(helm, ['--set', 'webhook.enabled=true', ...args])).find((o) => o.kind === 'Deployment')!.spec.template;
    const plain = webhookPod();
    expect(plain.spec.tolerations).toBeUndefined();
    expect(plain.spec.nodeSelector).toBeUndefined();
    expect(plain.metadata).toEqual({ labels: { 'app.kubernetes.io/name': 'ownerrefs-webhook' } });
    expect(plain.spec.containers[0].resources).toEqual({ requests: { cpu: '20m', memory: '96Mi' }, limits: { memory: '256Mi' } });
    const set = webhookPod('--set', 'webhook.podLabels.team=infra', '--set', 'webhook.podAnnotations.note=x',
      '--set', 'webhook.nodeSelector.pool=system', '--set', 'webhook.tolerations[0].key=dedicated', '--set', 'webhook.tolerations[0].operator=Exists',
      '--set', 'webhook.resources.requests.cpu=50m', '--set', 'webhook.resources.limits.memory=512Mi');
    expect(set.metadata.labels).toEqual({ 'app.kubernetes.io/name': 'ownerrefs-webhook', team: 'infra' });
    expect(set.metadata.annotations).toEqual({ note: 'x' });
    expect(set.spec.nodeSelector).toEqual({ pool: 'system' });
    expect(set.spec.tolerations).toEqual([{ key: 'dedicated', operator: 'Exists' }]);
    expect(set.spec.containers[0].resources).toEqual({ requests: { cpu: '50m', memory: '96Mi' }, limits: { memory: '512Mi' } });
  });

  const SPREAD = { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: { 'app.kubernetes.io/name': 'ownerrefs-webhook' } } };
  it.each([
    ['replicas', ['--set', 'webhook.replicas=3'], (d: Obj) => d.spec.replicas, 3],
    ['the default spread over nodes', [], (d: Obj) => d.spec.template.spec.topologySpreadConstraints, [SPREAD]],
    ['topologySpreadConstraints', ['--set-json', 'webhook.topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule",' +
      '"labelSelector":{"matchLabels":{"app.kubernetes.io/name":"ownerrefs-webhook"}}}]'],
    (d: Obj) => d.spec.template.spec.topologySpreadConstraints, [{ ...SPREAD, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'DoNotSchedule' }]],
    ['no spread', ['--set-json', 'webhook.topologySpreadConstraints=[]'], (d: Obj) => d.spec.template.spec.topologySpreadConstraints, undefined],
    ['no affinity by default', [], (d: Obj) => d.spec.template.spec.affinity, undefined],
    ['affinity', ['--set-json', 'webhook.affinity={"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"kubernetes.io/hostname",' +
      '"labelSelector":{"matchLabels":{"app.kubernetes.io/name":"ownerrefs-webhook"}}}]}}'],
    (d: Obj) => d.spec.template.spec.affinity, { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname',
      labelSelector: { matchLabels: { 'app.kubernetes.io/name': 'ownerrefs-webhook' } } }] } }],
    ['nodeSelector', ['--set', 'webhook.nodeSelector.pool=system'], (d: Obj) => d.spec.template.spec.nodeSelector, { pool: 'system' }],
    ['tolerations', ['--set', 'webhook.tolerations[0].key=dedicated', '--set', 'webhook.tolerations[0].operator=Exists'], (d: Obj) => d.spec.template.spec.tolerations,
      [{ key: 'dedicated', operator: 'Exists' }]],
    ['priorityClassName', ['--set', 'webhook.priorityClassName=platform-critical'], (d: Obj) => d.spec.template.spec.priorityClassName, 'platform-critical'],
    ['resources', ['--set', 'webhook.resources.requests.cpu=50m'], (d: Obj) => d.spec.template.spec.containers[0].resources,
      { requests: { cpu: '50m', memory: '96Mi' }, limits: { memory: '256Mi' } }],
    ['imagePullSecrets, the agent\'s too', ['--set', 'imagePullSecrets[0].name=regcred'], (d: Obj) => d.spec.template.spec.imagePullSecrets, [{ name: 'regcred' }]],
  ] as [string, string[], (deployment: Obj) => unknown, unknown][])('renders the webhook Deployment\'s %s', (_what, args, pick, want) => {
    const deployment = strictObjects(helmTemplate(helm, ['--set', 'webhook.enabled=true', ...args])).find((o) => o.kind === 'Deployment')!;
    expect(pick(deployment)).toEqual(want);
  });

  it('keeps its namespace when uninstalled or switched to namespace.create=false (Helm would delete it, and everything in it)', () => {
    const ns = objects(helmTemplate(helm)).find((o) => o.kind === 'Namespace')!;
    expect(ns.metadata.annotations['helm.sh/resource-policy']).toBe('keep');
  });

  it.each([
    ['a relative kubelet root', ['--set', 'kubeletRootDir=var/lib/kubelet'], 'kubeletRootDir'],
    ['a kubelet root that climbs', ['--set', 'kubeletRootDir=/var/../etc'], 'kubeletRootDir'],
    ['an unknown value', ['--set', 'kubeletRoot=/x'], 'kubeletRoot'],
    ['a bad digest', ['--set', 'image.digest=latest'], 'digest'],
    ['maxUnavailable 0', ['--set', 'maxUnavailable=0'], 'maxUnavailable'],
    ['a log level pino lacks', ['--set', 'logLevel=verbose'], 'logLevel'],
    ['a node selector label with a space', ['--set', 'nodeSelectorLabel=my label'], 'nodeSelectorLabel'],
    ['a custom kind without its resource', ['--set', 'followOwners.extraKinds[0]=argoproj.io/v1alpha1/Rollout'], 'extraKinds'],
    ['the webhook pods\' selector label in webhook.podLabels', ['--set', 'webhook.podLabels.app\\.kubernetes\\.io/name=x'], "invalid propertyName 'app.kubernetes.io/name'"],
    ['a namespace that is no DNS label', ['--set', 'namespace.name=Ownerrefs_System'], 'namespace'],
    ['a core kind to follow (it would grant get on every Secret)', ['--set', 'followOwners.rbac=true', '--set', 'followOwners.extraKinds[0]=/v1/Secret=secrets'], 'extraKinds'],
    ['the root directory as the kubelet root', ['--set', 'kubeletRootDir=/'], 'kubeletRootDir'],
    ['a tag in the repository', ['--set', 'image.repository=ghcr.io/ownerrefs-dev/ownerrefs-agent:0.1.0'], 'repository'],
    ['the selector label among the pod labels', ['--set', 'podLabels.app\\.kubernetes\\.io/name=x'], "invalid propertyName 'app.kubernetes.io/name'"],
    ['the chart\'s own name label among the monitoring labels', ['--set', 'monitoring.labels.app\\.kubernetes\\.io/name=x'], "invalid propertyName 'app.kubernetes.io/name'"],
    ['the selector label among the extra labels', ['--set', 'extraLabels.app\\.kubernetes\\.io/name=x'], "invalid propertyName 'app.kubernetes.io/name'"],
    ['an image pull secret that is no {name: ...}', ['--set', 'imagePullSecrets[0]=regcred'], 'imagePullSecrets'],
    ['a node selector for another OS (the agent runs on Linux only)', ['--set', 'nodeSelector.kubernetes\\.io/os=windows'], "/nodeSelector/kubernetes.io~1os': value must be 'linux'"],
    ['a node selector without kubernetes.io/os', ['--set', 'nodeSelector.kubernetes\\.io/os=null'], 'kubernetes.io/os'],
    ['no architecture', ['--set-json', 'architectures=[]'], 'architectures'],
    ['pod anti-affinity for the agent (nodes would lack one)', ['--set', 'affinity.podAntiAffinity.x=y'], 'podAntiAffinity'],
    ['a surge of agents (two on a node would share the CSI socket)', ['--set', 'updateStrategy.rollingUpdate.maxSurge=1'], 'rollingUpdate'],
    ['an update strategy DaemonSets lack', ['--set', 'updateStrategy.type=Recreate'], 'updateStrategy'],
    ['runAsNonRoot for the agent\'s container (it runs as uid 0)', ['--set', 'securityContext.runAsNonRoot=true'], 'runAsNonRoot'],
    ['runAsNonRoot for the agent\'s pod', ['--set', 'podSecurityContext.runAsNonRoot=true'], 'runAsNonRoot'],
    ['another uid for the agent', ['--set', 'securityContext.runAsUser=1000'], 'runAsUser'],
    ['a privileged agent', ['--set', 'securityContext.privileged=true'], 'privileged'],
    ['a writable root filesystem for the agent', ['--set', 'securityContext.readOnlyRootFilesystem=false'], 'readOnlyRootFilesystem'],
    ['an added capability', ['--set', 'securityContext.capabilities.add[0]=SYS_ADMIN'], 'capabilities'],
    ['an unconfined seccomp profile', ['--set', 'securityContext.seccompProfile.type=Unconfined'], 'seccompProfile'],
    ['a Localhost seccomp profile without its file', ['--set', 'podSecurityContext.seccompProfile.type=Localhost'], 'localhostProfile'],
    ['no webhook replica', ['--set', 'webhook.replicas=0'], 'replicas'],
    ['a webhook spread that counts no pods (no labelSelector)', ['--set-json', 'webhook.topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"ScheduleAnyway"}]'],
      'labelSelector'],
    ['an affinity of another kind for the webhook', ['--set', 'webhook.affinity.nodeSelector.x=y'], 'nodeSelector'],
    ['a NetworkPolicy that would admit no API server', ['--set', 'webhook.enabled=true', '--set', 'webhook.networkPolicy.enabled=true'], 'apiServerCIDRs'],
    ['an API server address that is not a CIDR', ['--set', 'webhook.networkPolicy.enabled=true', '--set', 'webhook.networkPolicy.apiServerCIDRs[0]=apiserver'], 'apiServerCIDRs'],
  ])('refuses %s, naming the value', (_what, args, names) => {
    const r = spawnSync(helm, ['template', 'x', CHART, ...args], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/values don't meet the specifications of the schema|schema/i);
    expect(r.stderr).toContain(names);
  });
});
