// Server-Sent Events read from a fetch() answer's body: EventSource cannot POST, and aborting the fetch ends the stream (and the server's work).

// Calls onEvent(name, data) for each event of the stream, data parsed by
// parse (JSON by default); resolves when the stream ends. An event
// without a name is "message", as in EventSource; comment lines are
// skipped.
export async function readSse(response, onEvent, parse = JSON.parse) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  let name = 'message', data = [];
  const line = (text) => {
    if (text === '') {
      if (data.length) onEvent(name, parse(data.join('\n')));
      name = 'message';
      data = [];
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') name = value;
    else if (field === 'data') data.push(value);
  };
  for (;;) {
    const { value, done } = await reader.read();
    pending += decoder.decode(value || new Uint8Array(), { stream: !done });
    let nl;
    while ((nl = pending.search(/\r\n|\n|\r/)) >= 0) {
      const text = pending.slice(0, nl);
      pending = pending.slice(nl + (pending.startsWith('\r\n', nl) ? 2 : 1));
      line(text);
    }
    if (done) {
      if (pending) line(pending);
      line('');
      return;
    }
  }
}
