// The view's downloads (the head's PNG, the grid's or model view's PNG, the rollout's, each also as SVG; the lines view as SVG; the JSON) and the link that shares it.
//
// A PNG is the server's, asked for only when its link is clicked: a GET
// URL the browser follows, or for embeddings (which only a POST carries)
// a request made on the click. With [CLS] and [SEP] hidden on the page,
// the links ask the server to leave them out too (special=hide).
import { $ } from './dom.js';
import { state } from './state.js';
import { pngUrl, fetchPng } from './api.js';
import { svgLinkBeside, listenLinesDownload } from './svgdownload.js';

const PNG_LINKS = { head: 'dl-head', grid: 'dl-grid', rollout: 'dl-rollout' };

// links: { head, grid, rollout }, each [image query, file name], rollout
// null without a model; text: the answer's JSON as sent.
export function showDownloads(links, text) {
  for (const [which, id] of Object.entries(PNG_LINKS)) {
    const a = $(id);
    if (!links[which]) continue;
    const [params, name] = links[which];
    const url = pngUrl(state, params);
    a.download = name;
    a.dataset.params = JSON.stringify(params);
    a.href = url || '#';
    a.dataset.post = String(!url);
    svgLinkBeside(a);
  }
  const old = $('dl-json').href;
  if (old.startsWith('blob:')) URL.revokeObjectURL(old);
  $('dl-json').href = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
}

// A PNG link of embeddings: the POST is made now, and its answer saved
// under the link's file name.
async function postDownload(e) {
  const a = e.currentTarget;
  if (a.dataset.post !== 'true') return; // a GET URL: the browser follows it
  e.preventDefault();
  try {
    const url = URL.createObjectURL(await fetchPng(state, JSON.parse(a.dataset.params)));
    const save = document.createElement('a');
    save.href = url;
    save.download = a.download;
    save.click();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  } catch (err) {
    $('status').textContent = `The PNG could not be made: ${err.message}`;
  }
}

export function listenDownloads() {
  for (const id of Object.values(PNG_LINKS)) $(id).addEventListener('click', postDownload);
  listenLinesDownload();
}

// The clipboard may be refused (no permission, no secure context): then
// the link is shown for copying by hand.
export async function copyLink() {
  try {
    await navigator.clipboard.writeText(location.href);
    $('status').textContent = 'Link copied.';
  } catch (err) {
    $('status').textContent = `Copy this link: ${location.href}`;
  }
}
