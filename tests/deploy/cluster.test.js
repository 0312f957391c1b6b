// Three attnd replicas behind nginx on loopback, run as deploy/ ships them,
// under a mixed load while replicas fail: SIGKILL mid-load and a restart,
// then a rolling restart by SIGTERM. No client request may fail: nginx
// must hide every failure, and every answer must be the bytes a replica
// gives when asked directly. Then nginx's cache, /metrics kept inside,
// the body limit, and the weights' pages shared between replicas.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  root, freePort, metric, Nginx, Replica, request, sha, shippedEnv, sleep, tempDir, waitFor,
} from './cluster.js';
import { fixedSpecs, failures, Load, reference } from './load.js';

const CLIENTS = 6;
const MODELS = `bert=${root}tests/models/f32,llama=${root}tests/models/llama_16x32`;
let dir, replicas, nginx, refs;

before(async () => {
  dir = tempDir();
  const ports = [await freePort(), await freePort(), await freePort()];
  replicas = ports.map((p, i) => new Replica(dir, i + 1, p, MODELS));
  await Promise.all(replicas.map((r) => r.start()));
  nginx = new Nginx(dir, ports, await freePort());
  await nginx.start();
  // Each fixed request's answer, from the first replica directly.
  refs = new Map();
  for (const s of fixedSpecs()) refs.set(s.key, await reference(replicas[0].base, s));
});

after(async () => {
  await nginx?.stop();
  for (const r of replicas || []) {
    if (r.child && r.child.exitCode === null) {
      r.signal('SIGTERM');
      await Promise.race([r.child.exited, sleep(12000)]);
    }
  }
});

function summary(results) {
  const by = {};
  for (const r of results) by[r.kind] = (by[r.kind] || 0) + 1;
  return `${results.length} requests (${Object.entries(by).map(([k, n]) => `${n} ${k}`).join(', ')})`;
}

// How long the test waits for each thing it needs from the load: the
// load's clients are slowed on a busy machine, so each wait is for a
// count or a state, never a fixed time, and its failure names its deadline.
const LOAD_WAIT_MS = 60000; // for requests to complete
const STATE_WAIT_MS = 30000; // for a replica to compute, or serve again
const secs = (ms) => `${ms / 1000} s`;

// Polls replica r directly until it is computing something that came
// through nginx; resolves to the count, or 0 after ms.
async function computing(r, ms) {
  let n = 0;
  await waitFor(async () => (n = await metric(r.base, 'attnd_computations_running')) > 0, ms, 5);
  return n > 0 ? n : 0;
}

// Waits until nginx sends r requests again (its new access log has some).
function servingAgain(r, ms) {
  return waitFor(() => r.served() > 0, ms, 50);
}

// Waits until `n` of the load's requests that began at or after `from`
// (ms since the epoch) have been answered; resolves to whether they were
// within ms.
function completed(load, n, from, ms) {
  return waitFor(() => load.results.filter((x) => x.t0 >= from).length >= n, ms, 25);
}

test('the shipped nginx configuration passes nginx -t, with only its ports templated', () => {
  // 3 upstream servers and 1 listener, nothing else
  assert.equal(nginx.changedLines, 4);
  assert.ok(nginx.sameLineCount);
  const t = nginx.test();
  assert.equal(t.status, 0, t.stderr);
  assert.match(t.stderr, /test is successful/);
});

test('SIGKILL of a replica mid-load, then its restart: no client request fails', async () => {
  // Around the kill: BEFORE requests answered before it (the victim among
  // those who answered), AFTER begun once the victim serves again, and
  // more than ENOUGH in all. The load runs until it has them.
  const BEFORE = 25, AFTER = 15, ENOUGH = 50;
  const victim = replicas[1];
  const started = Date.now();
  const load = new Load(nginx.base, CLIENTS, 1).start();
  const warm = await waitFor(() => load.results.length >= BEFORE && victim.served() > 0, LOAD_WAIT_MS);
  const servedBefore = victim.served();
  const answeredBefore = load.results.length;
  // The kill comes while the victim computes something that came through
  // nginx, and while no streamed answer is in flight anywhere: a streamed
  // answer cut after its first bytes is the one failure nginx cannot hide
  // (docs/deploy.md), and a busy machine stretches the time it streams.
  // The check and the kill are in one step, so no request starts between.
  let running = 0, streamingAtKill = 0, clientsInFlight = 0, killedAt = 0;
  const timely = await waitFor(async () => {
    running = await metric(victim.base, 'attnd_computations_running');
    if (!(running > 0) || load.streaming > 0) return false;
    [killedAt, clientsInFlight, streamingAtKill] = [Date.now(), load.inFlight, load.streaming];
    victim.signal('SIGKILL');
    return true;
  }, STATE_WAIT_MS, 5);
  if (!timely) { // killed all the same, so that the test goes on to its end
    [killedAt, clientsInFlight, streamingAtKill] = [Date.now(), load.inFlight, load.streaming];
    victim.signal('SIGKILL');
  }
  const exit = await victim.child.exited;
  // the load goes on with the victim dead for a second at least, and
  // until a round of requests begun after the kill has been answered
  const deadAt = Date.now();
  await sleep(1000);
  const whileDead = await completed(load, CLIENTS, deadAt, LOAD_WAIT_MS);
  await victim.start();
  const back = await servingAgain(victim, STATE_WAIT_MS);
  const backAt = Date.now();
  const enough = await completed(load, AFTER, backAt, LOAD_WAIT_MS) &&
    await waitFor(() => load.results.length > ENOUGH, LOAD_WAIT_MS);
  const results = await load.stop();
  const answeredAfter = results.filter((x) => x.t0 >= backAt).length;
  console.log(`kill: ${summary(results)} in ${((Date.now() - started) / 1000).toFixed(1)} s, ` +
    `${answeredBefore} before the kill and ${answeredAfter} after the restart; the victim had answered ` +
    `${servedBefore} and was computing ${running} with ${clientsInFlight} client requests in flight ` +
    `(${streamingAtKill} streamed)`);

  assert.ok(warm, `the load had ${BEFORE} answers and the victim had served some, within ${secs(LOAD_WAIT_MS)} ` +
    `(${answeredBefore} answers, the victim ${servedBefore})`);
  assert.ok(servedBefore > 0, 'the killed replica had served requests before');
  assert.ok(timely, `the killed replica was computing, with no streamed answer in flight, within ${secs(STATE_WAIT_MS)} ` +
    `(computing ${running}, ${streamingAtKill} streamed in flight at the kill)`);
  assert.equal(exit.signal, 'SIGKILL');
  assert.ok(whileDead, `${CLIENTS} requests begun with the victim dead were answered within ${secs(LOAD_WAIT_MS)}`);
  assert.ok(back, `nginx sends the restarted replica requests again within ${secs(STATE_WAIT_MS)}`);
  assert.ok(enough, `${AFTER} requests begun after the restart were answered, and more than ${ENOUGH} in all, ` +
    `each within ${secs(LOAD_WAIT_MS)} (${answeredAfter} after, ${results.length} in all)`);
  // nginx retried what the dead replica held: a request it sent there
  // around the kill has that replica and then another in its upstreams.
  const retried = nginx.entries().filter((e) => e.upstreams.length > 1 && e.upstreams[0] === victim.addr &&
    Math.abs(e.time - killedAt) < 3000);
  console.log(`kill: nginx retried ${retried.length} requests on another replica (${retried.map((e) => `${e.method} ${e.upstreamStatus.join(',')}`).join('; ')})`);
  assert.ok(retried.some((e) => e.method === 'POST' && e.status === 200),
    'a POST in flight on the killed replica was answered by another');
  const failed = await failures(results, refs, replicas[0].base, load.unique);
  assert.deepEqual(failed, [], `${failed.length} of ${results.length} client requests failed`);
  assert.ok(results.length > ENOUGH, `enough requests: ${results.length}`);
});

test('a rolling restart by SIGTERM under load: no client request fails', async () => {
  const load = new Load(nginx.base, CLIENTS, 2).start();
  const drainSeconds = Number(shippedEnv().ATTND_DRAIN_SECONDS);
  // One replica out at a time, as the Deployment's maxUnavailable: 0
  // has it: the next is stopped once the one restarted before it serves
  // again and every request sent before that one stopped has been
  // answered (what its drain passed on included). On a busy machine
  // those take longer, so the test waits for them, not for a time.
  let unready = null, previous = null, sentAtStop = 0;
  for (const r of replicas) {
    const ready = await servingAgain(r, STATE_WAIT_MS) &&
      (!previous || await servingAgain(previous, STATE_WAIT_MS)) &&
      await waitFor(() => load.answeredBefore(sentAtStop), LOAD_WAIT_MS);
    if (!ready) {
      unready = `before replica ${r.index}'s restart: it and the replica restarted before it served, ` +
        `each within ${secs(STATE_WAIT_MS)}, and the ${sentAtStop} requests sent before that one stopped ` +
        `were answered within ${secs(LOAD_WAIT_MS)}: ${load.results.filter((x) => x.seq < sentAtStop).length} were`;
      break;
    }
    const running = await computing(r, STATE_WAIT_MS);
    const t0 = Date.now();
    r.signal('SIGTERM');
    const exit = await r.child.exited;
    sentAtStop = load.sent;
    const stopSeconds = (Date.now() - t0) / 1000;
    console.log(`rolling: replica ${r.index} had answered ${r.served()}, was computing ${running}, ` +
      `stopped in ${stopSeconds.toFixed(2)} s with status ${exit.code}`);
    assert.equal(exit.code, 0, r.log());
    assert.ok(stopSeconds < drainSeconds + 3, `replica ${r.index} stopped within the drain`);
    assert.match(r.log(), /SIGTERM: finishing requests in flight/);
    await r.start();
    previous = r;
  }
  const back = unready === null && await servingAgain(replicas[2], STATE_WAIT_MS);
  const results = await load.stop();
  console.log(`rolling: ${summary(results)}`);
  assert.equal(unready, null, unready);
  assert.ok(back, `replica ${replicas[2].index} serves after its restart, within ${secs(STATE_WAIT_MS)}`);
  const failed = await failures(results, refs, replicas[0].base, load.unique);
  assert.deepEqual(failed, [], `${failed.length} of ${results.length} client requests failed`);
  const drained = nginx.entries().filter((e) => e.upstreamStatus.length > 1 && e.status === 200);
  console.log(`rolling: nginx passed ${drained.length} requests on to another replica`);
});

test('repeated GETs are answered from nginx\'s cache, by URL, format and ETag', async () => {
  const urls = [0, 1, 2, 3].map((h) => `/attention?sentence=A%20class%20of%20students%20reads%20this&seed=9&format=png&head=${h}`);
  const before = nginx.entries().length;
  for (let round = 0; round < 25; round++) {
    for (const u of urls) {
      const r = await request(`${nginx.base}${u}`);
      assert.equal(r.status, 200);
      assert.equal(r.body.subarray(1, 4).toString(), 'PNG');
    }
  }
  const mine = nginx.entries().slice(before).filter((e) => urls.includes(e.uri));
  const hits = mine.filter((e) => e.cache === 'HIT').length;
  console.log(`cache: ${hits} of ${mine.length} repeated GETs were hits`);
  assert.equal(mine.length, 100);
  assert.equal(hits, 96, 'every GET after the first of its URL is a hit');

  // The same URL asking for JSON by Accept is a different answer (attnd's
  // Vary: Accept), never the cached PNG.
  const png = await request(`${nginx.base}/attention?sentence=Vary%20me`, { headers: { Accept: 'image/png' } });
  const js = await request(`${nginx.base}/attention?sentence=Vary%20me`, { headers: { Accept: 'application/json' } });
  const js2 = await request(`${nginx.base}/attention?sentence=Vary%20me`, { headers: { Accept: 'application/json' } });
  assert.equal(png.headers['content-type'], 'image/png');
  assert.match(js.headers['content-type'], /application\/json/);
  assert.equal(sha(js.body), sha(js2.body));

  // If-None-Match with the ETag: 304 from the cache, no body.
  const first = await request(`${nginx.base}${urls[0]}`);
  assert.ok(first.headers.etag);
  const again = await request(`${nginx.base}${urls[0]}`, { headers: { 'If-None-Match': first.headers.etag } });
  assert.equal(again.status, 304);
  assert.equal(again.headers['x-cache-status'], 'HIT');
  assert.equal(again.body.length, 0);
  // and the cached body is the replicas' own
  assert.equal(sha(first.body), sha((await request(`${replicas[1].base}${urls[0]}`)).body));
});

test('/metrics is answered by each replica and refused on nginx\'s side', async () => {
  for (const p of ['/metrics', '/metrics?x=1', '//metrics', '/%6Detrics', '/./metrics', '/x/../metrics']) {
    const r = await request(`${nginx.base}${p}`);
    assert.equal(r.status, 404, p);
    assert.doesNotMatch(r.body.toString(), /attnd_/, p);
  }
  const own = await request(`${replicas[0].base}/metrics`);
  assert.equal(own.status, 200);
  assert.match(own.body.toString(), /attnd_requests_total/);
});

test('nginx\'s body limit is attnd\'s: a body one byte over is refused before it is read', async () => {
  const max = Number(shippedEnv().ATTND_MAX_BODY);
  assert.match(readFileSync(`${root}deploy/nginx/nginx.conf`, 'utf8'),
    new RegExp(`client_max_body_size ${max / (1 << 20)}m;`));
  const over = await request(`${nginx.base}/attention`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Length': String(max + 1) },
  });
  assert.equal(over.status, 413);
  // what attnd itself says to the same
  const own = await request(`${replicas[0].base}/attention`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Length': String(max + 1) },
  });
  assert.equal(own.status, 413);
});

// smaps of pid: the mappings of the checkpoints' .safetensors files, summed.
function weightPages(pid) {
  const sum = { Rss: 0, Pss: 0, Shared_Clean: 0, Private_Clean: 0, Private_Dirty: 0, Shared_Dirty: 0 };
  let inWeights = false;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = line.match(/^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/);
    if (head) { inWeights = head[1].includes('/tests/models/') && head[1].endsWith('.safetensors'); continue; }
    const m = line.match(/^(\w+):\s+(\d+) kB$/);
    if (inWeights && m && m[1] in sum) sum[m[1]] += Number(m[2]);
  }
  return sum;
}

test('replicas on one host share the weights\' pages', async () => {
  // The same requests to each replica directly: each maps the same pages.
  const touch = fixedSpecs().filter((s) => s.kind === 'model json' || s.kind === 'large png');
  for (const r of replicas) for (const s of touch) await reference(r.base, s);
  const pages = replicas.map((r) => weightPages(r.child.pid));
  for (const [i, p] of pages.entries()) console.log(`pages: replica ${i + 1}: ${JSON.stringify(p)} kB`);
  for (const p of pages) {
    assert.ok(p.Rss > 0, 'the weights are mapped');
    assert.equal(p.Private_Dirty + p.Shared_Dirty, 0, 'no page of the weights is written');
    assert.equal(p.Shared_Clean, p.Rss, 'every resident page of the weights is shared');
    // three processes map each page: each is charged a third
    assert.ok(p.Pss * 2.5 <= p.Rss, `Pss ${p.Pss} kB is about a third of Rss ${p.Rss} kB`);
  }
});
