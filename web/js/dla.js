// Direct logit attribution of the clean prompt's answer to each head (POST /attention, return ["dla"]) as a ranked bar chart, and a head's ablation (POST /attention with ablate) shown as the next-token prediction before and after.
import { $ } from './dom.js';
import { divergingCss } from './diverging.js';
import { tokenText, short, showPanelErrors, problemOf } from './panel.js';

let asking = null; // the AbortController of the attribution being asked
let ablating = null; // that of the ablation being asked
let current = null; // { model, sentence, metric, dla } on screen

export function clearDla() {
  asking?.abort();
  ablating?.abort();
  asking = ablating = current = null;
  $('dla-view').hidden = true;
  $('ablation').hidden = true;
}

// The answer's tokens in words: “ Mary” − “ John”, or “ Mary”.
function targetWords(metric) {
  const q = (t) => `“${tokenText(t)}”`;
  return metric.kind === 'logprob' ? `the logit of ${q(metric.target)}`
    : `logit(${q(metric.correct)}) − logit(${q(metric.incorrect)})`;
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);

// Asks each head's direct contribution, on the clean prompt, to the
// answer's logit (or the difference of two), and draws the chart.
export async function runDla(model, sentence, metric) {
  asking?.abort();
  ablating?.abort();
  const mine = new AbortController();
  asking = mine;
  $('dla-error').textContent = '';
  const body = {
    model, sentence, return: ['dla'],
    dla_target: metric.kind === 'logprob' ? metric.target : [metric.correct, metric.incorrect],
  };
  try {
    const r = await fetch('/attention', {
      method: 'POST', signal: mine.signal,
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    if (asking !== mine) return;
    if (!r.ok) {
      const errors = await problemOf(r, 'dla');
      // the patch's own answer names the same fields; its box says the rest
      if (errors.dla) $('dla-error').textContent = errors.dla;
      else showPanelErrors(errors, 'patch-form', false);
      $('dla-view').hidden = !errors.dla;
      $('dla-chart').replaceChildren();
      return;
    }
    const d = await r.json();
    if (asking !== mine) return;
    current = { model, sentence, metric, dla: d.dla, tokens: d.tokens };
    draw();
  } catch (err) {
    if (err.name !== 'AbortError' && asking === mine) {
      $('dla-view').hidden = false;
      $('dla-error').textContent = `The server could not be reached: ${err.message}`;
    }
  }
}

function draw() {
  const { dla, metric, tokens } = current;
  $('dla-view').hidden = false;
  $('ablation').hidden = true;
  const heads = dla.heads.flat();
  const parts = [`heads ${short(sum(heads))}`, `MLPs ${short(sum(dla.mlp))}`];
  if (dla.attn_bias) parts.push(`attention biases ${short(sum(dla.attn_bias))}`);
  parts.push(`embedding ${short(dla.embed)}`, `final bias ${short(dla.bias)}`);
  $('dla-summary').textContent = `What each part writes directly into ${targetWords(metric)} at position `
    + `${dla.position} (“${tokenText(tokens[dla.position])}”), through the final norm's scale: `
    + `${parts.join(', ')}; together ${short(dla.total)} (the model's own: ${short(dla.logit)}).`;
  const list = [];
  dla.heads.forEach((row, l) => row.forEach((v, h) => list.push({ l, h, v })));
  // highest first; ties by layer, then head
  list.sort((a, b) => b.v - a.v || a.l - b.l || a.h - b.h);
  const top = Math.max(...list.map((e) => Math.abs(e.v)), 1e-30);
  const chart = $('dla-chart');
  const bars = list.map((e, i) => {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'bar';
    b.dataset.layer = String(e.l);
    b.dataset.head = String(e.h);
    b.dataset.value = String(e.v);
    b.tabIndex = i === 0 ? 0 : -1;
    b.setAttribute('aria-label', `rank ${i + 1}: layer ${e.l}, head ${e.h}, ${short(e.v)}; ablate it`);
    b.title = `layer ${e.l}, head ${e.h}: ${e.v}`;
    const label = Object.assign(document.createElement('span'), { className: 'bar-label', textContent: `L${e.l}·H${e.h}` });
    const track = Object.assign(document.createElement('span'), { className: 'bar-track' });
    const fill = Object.assign(document.createElement('span'), { className: 'bar-fill' });
    const w = (50 * Math.abs(e.v)) / top;
    fill.style.width = `${w}%`;
    fill.style[e.v >= 0 ? 'left' : 'right'] = '50%';
    fill.style.background = divergingCss(e.v >= 0 ? 0.75 : -0.75);
    track.append(fill);
    const value = Object.assign(document.createElement('span'), { className: 'bar-value', textContent: short(e.v) });
    b.append(label, track, value);
    b.addEventListener('click', () => { rove(b); ablate(e.l, e.h); });
    li.append(b);
    return li;
  });
  const buttons = bars.map((li) => li.firstChild);
  const rove = (to) => { for (const x of buttons) x.tabIndex = x === to ? 0 : -1; };
  chart.onkeydown = (ev) => {
    const i = buttons.indexOf(document.activeElement);
    if (i < 0) return;
    const to = { ArrowDown: i + 1, ArrowRight: i + 1, ArrowUp: i - 1, ArrowLeft: i - 1, Home: 0, End: buttons.length - 1 }[ev.key];
    if (to === undefined) return;
    ev.preventDefault();
    const b = buttons[Math.max(0, Math.min(buttons.length - 1, to))];
    rove(b);
    b.focus();
  };
  chart.replaceChildren(...bars);
}

// The next-token prediction at the last position: the last layer's row
// of the logit lens, the top tokens with their probabilities.
const prediction = (d) => d.logit_lens[d.logit_lens.length - 1][d.logit_lens[0].length - 1];

// Ablates layer l, head h on the clean prompt and shows the top next
// tokens before and after: two requests, with and without the ablation.
async function ablate(l, h) {
  if (!current) return;
  ablating?.abort();
  const mine = new AbortController();
  ablating = mine;
  const mode = $('ablate-mode').value;
  const base = { model: current.model, sentence: current.sentence, return: ['logit_lens'], logit_lens_k: 5 };
  const ask = (extra) => fetch('/attention', {
    method: 'POST', signal: mine.signal,
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...base, ...extra }),
  });
  $('dla-error').textContent = '';
  const caption = $('ablation-caption');
  caption.textContent = `Ablating layer ${l}, head ${h}…`;
  try {
    const [r0, r1] = await Promise.all([ask({}), ask({ ablate: [{ layer: l, head: h, mode }] })]);
    if (ablating !== mine) return;
    for (const r of [r0, r1]) {
      if (!r.ok) {
        const errors = await problemOf(r, 'dla');
        $('dla-error').textContent = Object.values(errors)[0];
        caption.textContent = '';
        return;
      }
    }
    const [before, after] = await Promise.all([r0.json(), r1.json()]);
    if (ablating !== mine) return;
    showAblation(l, h, mode, prediction(before), prediction(after), before.tokens);
  } catch (err) {
    if (err.name !== 'AbortError' && ablating === mine) $('dla-error').textContent = `The server could not be reached: ${err.message}`;
  }
}

function showAblation(l, h, mode, before, after, tokens) {
  const table = $('ablation-table');
  table.dataset.layer = String(l);
  table.dataset.head = String(h);
  const last = tokens[tokens.length - 1];
  $('ablation-caption').textContent = `The next token after “${tokenText(last)}”: the model as it is, and with `
    + `layer ${l}, head ${h} ${mode === 'mean' ? 'replaced by its mean over the positions' : 'zeroed'}`;
  const head = document.createElement('tr');
  for (const t of ['rank', 'before', 'p', 'after', 'p'])
    head.append(Object.assign(document.createElement('th'), { scope: 'col', textContent: t }));
  const inBefore = new Set(before.map((e) => e.token_id));
  const rows = before.map((b, i) => {
    const a = after[i];
    const tr = document.createElement('tr');
    tr.className = 'prediction';
    const cell = (text, cls, e) => {
      const td = Object.assign(document.createElement('td'), { textContent: text, className: cls });
      if (e) { td.dataset.tokenId = String(e.token_id); td.dataset.p = String(e.p); }
      return td;
    };
    tr.append(cell(String(i + 1), 'rank'), cell(tokenText(b.text), 'token before', b), cell(short(b.p), 'p', b),
      cell(tokenText(a.text), `token after${inBefore.has(a.token_id) ? '' : ' new'}`, a),
      cell(short(a.p), `p ${a.p > (before.find((x) => x.token_id === a.token_id)?.p ?? 0) ? 'up' : 'down'}`, a));
    return tr;
  });
  table.replaceChildren($('ablation-caption'), head, ...rows);
  $('ablation').hidden = false;
}
