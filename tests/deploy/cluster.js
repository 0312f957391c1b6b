// attnd replicas and nginx on loopback, as deploy/ ships them: every
// replica with the flags of deploy/compose.yaml, nginx with
// deploy/nginx/nginx.conf where only the upstream servers' and the
// listener's host:port are replaced. Each process is started here, known
// by its PID, and stopped on every way out of the test process.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

export const root = fileURLToPath(new URL('../../', import.meta.url));
export const ATTND = process.env.ATTND_BIN || `${root}build/attnd`;
export const NGINX = process.env.NGINX || '/usr/sbin/nginx';

// ------------------------------------------------------------- cleanup
// Every child still running, by PID. On any exit of this process, each
// gets SIGKILL (nginx: its whole process group, which it was started
// as the leader of, so that its workers go too).
const running = new Map();

function killAll() {
  for (const [pid, group] of running) {
    try { process.kill(group ? -pid : pid, 'SIGKILL'); } catch { /* gone */ }
  }
  running.clear();
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => { killAll(); process.exit(128 + constants.signals[sig]); });
}

function track(child, group) {
  running.set(child.pid, group);
  child.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      running.delete(child.pid);
      resolve({ code, signal });
    });
  });
  return child;
}

// ------------------------------------------------------------- the files
// The shipped attnd flags: deploy/compose.yaml's replica environment.
export function composeFile() {
  return YAML.parse(readFileSync(`${root}deploy/compose.yaml`, 'utf8'), { merge: true });
}

export function shippedEnv() {
  const env = composeFile()['x-attnd'].environment;
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
}

// deploy/nginx/nginx.conf with server attnd-N:8080 -> 127.0.0.1:ports[N-1]
// and listen 8080 -> 127.0.0.1:listen; returns the text and the number of
// lines changed, which the caller compares with what it expects.
export function templateNginx(ports, listen) {
  const shipped = readFileSync(`${root}deploy/nginx/nginx.conf`, 'utf8');
  const text = shipped
    .replace(/^(\s*server\s+)attnd-(\d+):8080\b/gm, (_, lead, n) => `${lead}127.0.0.1:${ports[Number(n) - 1]}`)
    .replace(/^(\s*listen\s+)8080;/gm, (_, lead) => `${lead}127.0.0.1:${listen};`);
  const a = shipped.split('\n');
  const b = text.split('\n');
  const changed = a.filter((line, i) => line !== b[i]).length;
  return { text, changed, lines: a.length === b.length };
}

// ------------------------------------------------------------- ports
// A port free on 127.0.0.1 now (the kernel's choice); attnd and nginx
// are started on it at once.
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls cond() (it may be async) every `every` ms until it is true;
// resolves to true, or to false once `ms` have passed without it. A test
// whose load is slowed by a busy machine waits here for what it needs,
// up to a deadline it names in its own failure message.
export async function waitFor(cond, ms, every = 25) {
  const until = Date.now() + ms;
  for (;;) {
    if (await cond()) return true;
    if (Date.now() >= until) return false;
    await sleep(every);
  }
}

// ------------------------------------------------------------- HTTP
const direct = new http.Agent({ keepAlive: false });

// One request, no retry: resolves to { status, headers, body (Buffer) } or
// { error } when the connection failed or the answer was cut.
export function request(url, { method = 'GET', body, headers = {}, agent = direct, timeout = 60000 } = {}) {
  return new Promise((resolve) => {
    const req = http.request(url, { method, agent, headers, timeout }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        if (!res.complete) resolve({ error: 'answer cut short', status: res.statusCode });
        else resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) });
      });
      res.on('error', (e) => resolve({ error: e.message, status: res.statusCode }));
      res.on('aborted', () => resolve({ error: 'aborted', status: res.statusCode }));
    });
    req.on('timeout', () => req.destroy(new Error('client timeout')));
    req.on('error', (e) => resolve({ error: e.message }));
    req.end(body);
  });
}

export const sha = (buf) => createHash('sha256').update(buf).digest('hex');

// The value of a gauge or the sum of a counter over its series.
export async function metric(base, name) {
  const r = await request(`${base}/metrics`, { timeout: 2000 });
  if (r.error || r.status !== 200) return NaN;
  let sum = 0;
  for (const line of r.body.toString().split('\n')) {
    const m = line.match(/^([a-z_]+)(\{[^}]*\})? (\S+)$/);
    if (m && m[1] === name) sum += Number(m[3]);
  }
  return sum;
}

// ------------------------------------------------------------- attnd
// How long a replica or nginx may take to answer /healthz once started.
const START_MS = 30000;

// A replica: attnd on 127.0.0.1:port with the shipped environment, the
// committed test checkpoints as its models, its access log in a file.
export class Replica {
  constructor(dir, index, port, models) {
    Object.assign(this, { dir, index, port, models, starts: 0, child: null });
    this.base = `http://127.0.0.1:${port}`;
    this.addr = `127.0.0.1:${port}`;
  }

  logPath() { return join(this.dir, `attnd-${this.index}.${this.starts}.log`); }

  async start() {
    this.starts += 1;
    const env = {
      ...process.env, ...shippedEnv(),
      ATTND_BIND: '127.0.0.1', ATTND_PORT: String(this.port),
      ATTND_MODELS: this.models, ATTND_WEB_ROOT: `${root}web`,
    };
    const fd = openSync(this.logPath(), 'w');
    this.child = track(spawn(ATTND, [], { env, stdio: ['ignore', fd, fd] }), false);
    closeSync(fd);
    const until = Date.now() + START_MS;
    while (Date.now() < until) {
      const r = await request(`${this.base}/healthz`, { timeout: 1000 });
      if (r.status === 200) return;
      if (this.child.exitCode !== null) break;
      await sleep(25);
    }
    throw new Error(`replica ${this.index} did not answer /healthz within ${START_MS / 1000} s ` +
      `(exit ${this.child.exitCode}): ${readFileSync(this.logPath(), 'utf8')}`);
  }

  // The requests this start of the replica has answered: its access log's
  // lines for a route other than /healthz and /metrics (the test's own).
  served() {
    return readFileSync(this.logPath(), 'utf8').split('\n')
      .filter((l) => /\s(GET|POST)\s/.test(l) && !/\s\/(healthz|metrics)\s/.test(l)).length;
  }

  log() { return readFileSync(this.logPath(), 'utf8'); }

  signal(sig) { process.kill(this.child.pid, sig); }
}

// ------------------------------------------------------------- nginx
// Never as root: run as root (CI is), the test starts nginx as nobody,
// in a prefix of nobody's own.
const NOBODY = 65534;
const asUser = () => (process.getuid() === 0 ? { uid: NOBODY, gid: NOBODY } : {});

export class Nginx {
  constructor(dir, ports, listen) {
    Object.assign(this, { ports, listen });
    this.dir = join(dir, 'nginx');
    mkdirSync(this.dir);
    if (process.getuid() === 0) {
      chmodSync(dir, 0o711);
      chownSync(this.dir, NOBODY, NOBODY);
    }
    this.base = `http://127.0.0.1:${listen}`;
    this.conf = join(this.dir, 'nginx.conf');
    this.accessLog = join(this.dir, 'access.log');
    this.errorLog = join(this.dir, 'error.log');
    const t = templateNginx(ports, listen);
    this.changedLines = t.changed;
    this.sameLineCount = t.lines;
    writeFileSync(this.conf, t.text);
  }

  // The command line: its own prefix (the temporary directory: temp
  // paths and cache), error log and pid file; never the system's.
  args(extra = []) {
    return ['-p', `${this.dir}/`, '-e', this.errorLog, '-c', this.conf,
      '-g', `daemon off; pid ${join(this.dir, 'nginx.pid')};`, ...extra];
  }

  // nginx -t opens every file the configuration names, /dev/stdout too:
  // a file here.
  test() {
    const fd = openSync(this.accessLog, 'a');
    try {
      return spawnSync(NGINX, this.args(['-t']), { encoding: 'utf8', stdio: ['ignore', fd, 'pipe'], ...asUser() });
    } finally { closeSync(fd); }
  }

  async start() {
    // access_log /dev/stdout: the file the test reads, which nginx opens
    // again by that name, so it is nginx's user's.
    const fd = openSync(this.accessLog, 'w');
    if (process.getuid() === 0) chownSync(this.accessLog, NOBODY, NOBODY);
    this.child = track(spawn(NGINX, this.args(), { stdio: ['ignore', fd, 'inherit'], detached: true, ...asUser() }), true);
    closeSync(fd);
    const until = Date.now() + START_MS;
    while (Date.now() < until) {
      const r = await request(`${this.base}/healthz`, { timeout: 1000 });
      if (r.status === 200) return;
      if (this.child.exitCode !== null) break;
      await sleep(25);
    }
    throw new Error(`nginx did not answer /healthz within ${START_MS / 1000} s: ${readFileSync(this.errorLog, 'utf8').slice(-2000)}`);
  }

  // The access log's lines, parsed (log_format attnd).
  entries() {
    const out = [];
    for (const line of readFileSync(this.accessLog, 'utf8').split('\n')) {
      const m = line.match(/^(\S+) \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d+) (\d+) (\S+) cache=(\S+) upstream="([^"]*)" upstream_status="([^"]*)"$/);
      if (!m) continue;
      out.push({
        time: Date.parse(m[2]), method: m[3], uri: m[4], status: Number(m[5]), bytes: Number(m[6]),
        cache: m[8], upstreams: m[9] === '-' ? [] : m[9].split(/, | : /),
        upstreamStatus: m[10] === '-' ? [] : m[10].split(/, | : /),
      });
    }
    return out;
  }

  async stop() {
    if (!this.child || this.child.exitCode !== null) return;
    process.kill(this.child.pid, 'SIGQUIT');
    const done = await Promise.race([this.child.exited, sleep(5000).then(() => null)]);
    if (!done) try { process.kill(-this.child.pid, 'SIGKILL'); } catch { /* gone */ }
  }
}

export function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), 'attnd-deploy-'));
  process.on('exit', () => { if (!process.env.KEEP_DEPLOY_TMP) rmSync(dir, { recursive: true, force: true }); });
  return dir;
}
