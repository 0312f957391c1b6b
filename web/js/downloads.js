// The view's downloads (the head's PNG, the grid's PNG, the JSON) and the link that shares it.
import { $ } from './dom.js';

// head: the selected head ("0", …, "mean"); text: the answer's JSON as sent.
export function showDownloads(head, headUrl, gridUrl, text) {
  $('dl-head').href = headUrl;
  $('dl-head').download = `attention-head-${head}.png`;
  $('dl-grid').href = gridUrl;
  const old = $('dl-json').href;
  if (old.startsWith('blob:')) URL.revokeObjectURL(old);
  $('dl-json').href = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
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
