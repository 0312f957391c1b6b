// What the browser tests share: attnd started on a loopback port, and
// Debian's Chromium launched through playwright-core.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const root = fileURLToPath(new URL('../../', import.meta.url));

// Starts attnd on a free loopback port serving webRoot; flags: more of
// its flags, after the harness's own. Resolves to { child, url } once it
// serves; stop it with child.kill('SIGTERM').
export function startServer(flags = [], webRoot = `${root}web`) {
  const bin = process.env.ATTND_BIN || `${root}build/attnd`;
  const child = spawn(bin, ['--port', '0', '--web-root', webRoot, '--threads', '2', ...flags],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => reject(new Error(`attnd did not start: ${log}`)), 10000);
    child.stderr.on('data', (chunk) => {
      log += chunk;
      const m = log.match(/serving http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: `http://127.0.0.1:${m[1]}` });
      }
    });
    child.on('exit', (code) => reject(new Error(`attnd exited (${code}): ${log}`)));
  });
}

export function launchBrowser() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// The sum of a counter of GET /metrics over the series whose labels
// include every one of labels ('route="/attention"').
export async function metric(base, name, ...labels) {
  const text = await (await fetch(`${base}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-z_]+)(\{[^}]*\})? (\S+)$/);
    if (!m || m[1] !== name) continue;
    if (labels.every((l) => (m[2] || '').includes(l))) sum += Number(m[3]);
  }
  return sum;
}
