// The chat's reply: POST /v1/chat/completions streamed (Server-Sent Events of data lines alone, read from fetch()'s body), the reply shown as it comes, then the finished sequence in every view as a continued text's is (generate.js).
import { $ } from './dom.js';
import { readSse } from './sse.js';
import { conversation } from './chat.js';
import { showSequence, sampling, RETURNED } from './generate.js';

// A chunk's data: JSON, but for the stream's last line, "[DONE]" (null).
const parseChunk = (text) => (text === '[DONE]' ? null : JSON.parse(text));

// The request for the conversation c with the sampling controls s. The
// attention asked of the finished sequence is the continued text's, so
// the answer has the same layout.
export function chatRequest(c, s) {
  const { model, messages, add_generation_prompt, continue_final_message, chat_template_kwargs } = c;
  const body = {
    model, messages, add_generation_prompt, continue_final_message,
    max_tokens: s.max_new, temperature: s.temperature, top_k: s.top_k, top_p: s.top_p, seed: s.seed,
    stream: true, stream_options: { include_usage: true },
    attention: { return: RETURNED, logit_lens_k: 1 },
  };
  if (chat_template_kwargs) body.chat_template_kwargs = chat_template_kwargs;
  return body;
}

function fail(message) {
  $('generate-status').textContent = '';
  $('generate-error').textContent = message;
}

// An OpenAI-shaped error's message ({"error": {"message", ...}}), or what
// else the server said.
const errorMessage = (doc, status) => doc?.error?.message ?? doc?.detail ?? `The server answered HTTP ${status}.`;

// Streams the reply into the reply box; signal aborts the fetch (Stop).
export async function streamChat(signal) {
  const c = conversation();
  if (c.error) {
    fail(c.error);
    return;
  }
  const reply = $('chat-reply');
  reply.textContent = '';
  // a continued message: its text first, the reply after it
  $('chat-reply-before').textContent = c.continue_final_message ? c.messages.at(-1).content : '';
  $('chat-reply-title').textContent = c.continue_final_message ? 'Reply (continuing the final message)' : 'Reply';
  $('chat-reply-box').hidden = false;
  $('chat-reply-box').setAttribute('aria-busy', 'true');
  try {
    const response = await fetch('/v1/chat/completions', {
      method: 'POST', signal,
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify(chatRequest(c, sampling())),
    });
    if (!response.ok) {
      fail(errorMessage(await response.json().catch(() => null), response.status));
      return;
    }
    let attention = null, why = null, usage = null, failed = null, pieces = 0;
    await readSse(response, (name, data) => {
      if (data === null) return;
      if (data.error) failed = data.error.message ?? JSON.stringify(data.error);
      if (data.usage) usage = data.usage;
      const choice = data.choices?.[0];
      if (choice?.delta?.content) {
        reply.append(choice.delta.content);
        pieces++;
      }
      if (choice?.finish_reason) why = choice.finish_reason;
      if (data.attention) attention = data.attention;
    }, parseChunk);
    if (failed !== null) {
      fail(`Stopped: ${failed}`);
      return;
    }
    if (!attention) {
      fail('The reply ended without the attention of its sequence.');
      return;
    }
    // the prompt's tokens come first in the sequence: the usage chunk
    // counts them; without it, each piece of text was one token
    const prompt = usage?.prompt_tokens ?? attention.tokens.length - pieces;
    showSequence(attention, prompt, why);
  } finally {
    $('chat-reply-box').removeAttribute('aria-busy');
  }
}
