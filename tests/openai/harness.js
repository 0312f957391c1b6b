// What the client tests share: attnd started on a free loopback port with
// the test checkpoints loaded, and OpenAI's own client pointed at it.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

export const root = fileURLToPath(new URL('../../', import.meta.url));

// The checkpoints every test file loads, by the names the tests use:
// Llama 3.2's, Qwen3's and Gemma 2's chat templates, and GPT-2 (none).
export const MODELS = {
  llama3: 'tests/models/llama3',
  qwen3: 'tests/models/qwen3',
  gemma2: 'tests/models/gemma2',
  gpt2: 'tests/models/gpt2',
};

// Llama 3.2's template writes today's date unless it is given one.
export const LLAMA_KWARGS = { date_string: '05 Mar 2026' };

// Starts attnd (ATTND_BIN, else build/attnd) from the repository root
// with MODELS loaded and flags after them. Resolves to { child, url,
// baseURL } once it serves; stop it with stopServer(child).
export function startServer(flags = []) {
  const bin = process.env.ATTND_BIN || `${root}build/attnd`;
  const models = Object.entries(MODELS).flatMap(([name, dir]) => ['--model', `${name}=${dir}`]);
  const child = spawn(bin, ['--port', '0', '--threads', '2', '--quiet', ...models, ...flags],
    { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`attnd did not start in 20 s: ${log}`));
    }, 20000);
    child.stderr.on('data', (chunk) => {
      log += chunk;
      const m = log.match(/serving http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) {
        clearTimeout(timer);
        const url = `http://127.0.0.1:${m[1]}`;
        resolve({ child, url, baseURL: `${url}/v1` });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`attnd exited (${code}): ${log}`));
    });
  });
}

// SIGTERM to the server this harness started, by its PID; SIGKILL if it
// has not exited within 10 s. Resolves to its exit code (or signal).
export function stopServer(child) {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve(child.exitCode ?? child.signalCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => process.kill(child.pid, 'SIGKILL'), 10000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? signal);
    });
    process.kill(child.pid, 'SIGTERM');
  });
}

// OpenAI's client on the server: any key, no retries (an error a test
// expects comes back at once), every request bounded in time.
export function client(baseURL, options = {}) {
  return new OpenAI({ baseURL, apiKey: 'sk-attnd-test', maxRetries: 0, timeout: 30000, ...options });
}

// The sum of a counter of GET /metrics over the series whose labels
// include every one of labels.
export async function metric(url, name, ...labels) {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-z_]+)(\{[^}]*\})? (\S+)$/);
    if (!m || m[1] !== name) continue;
    if (labels.every((l) => (m[2] || '').includes(l))) sum += Number(m[3]);
  }
  return sum;
}

// Resolves once check() is true, polling every 50 ms; rejects after ms.
export async function eventually(check, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
