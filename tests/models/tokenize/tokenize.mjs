// Token ids from the Hugging Face tokenizers library (the Rust crate through
// its Node binding), for tests/models/generate_decoders.py.
//
//   node tests/models/tokenize/tokenize.mjs < request.json > answer.json
//
// request: {"tokenizers": [{"name": ..., "files": F, "texts": [...]}, ...]}
// where F is {"tokenizer.json": PATH}, read by Tokenizer.fromFile as
// transformers' fast tokenizers read it, or {"vocab.json": PATH,
// "merges.txt": PATH, "special": [TOKEN, ...]} for a GPT-2 folder without
// tokenizer.json: the library's own BPE file reader, then what transformers'
// GPT2Converter adds (a byte-level pre-tokenizer without a prefix space, a
// byte-level post-processor) and the tokenizer's special tokens.
//
// answer: {"library": "tokenizers VERSION", "tokenizers": [{"name", "vocab_size"
// (added tokens included), "base_vocab_size", "vocab" (token -> id, added
// tokens included), "encodings": [{"text", "ids", "tokens",
// "special_tokens_mask", "ids_without_special", "decoded",
// "decoded_skip_special"}]}]}. A file the library refuses fails the run.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import tk from 'tokenizers';

const require = createRequire(import.meta.url);
const version = require('tokenizers/package.json').version;

async function load(files) {
  if (files['tokenizer.json']) return tk.Tokenizer.fromFile(files['tokenizer.json']);
  const model = await tk.BPE.fromFile(files['vocab.json'], files['merges.txt'], {
    continuingSubwordPrefix: '',
    endOfWordSuffix: '',
    fuseUnk: false,
  });
  const t = new tk.Tokenizer(model);
  t.setPreTokenizer(tk.byteLevelPreTokenizer(false, true));
  t.setPostProcessor(tk.byteLevelProcessing(false));
  t.addSpecialTokens(files.special || []);
  return t;
}

async function run(job) {
  const t = await load(job.files);
  const encodings = [];
  for (const text of job.texts) {
    const e = await t.encode(text);
    const plain = await t.encode(text, null, { addSpecialTokens: false });
    encodings.push({
      text,
      ids: e.getIds(),
      tokens: e.getTokens(),
      special_tokens_mask: e.getSpecialTokensMask(),
      ids_without_special: plain.getIds(),
      decoded: t.getDecoder() ? await t.decode(e.getIds(), false) : null,
      decoded_skip_special: t.getDecoder() ? await t.decode(e.getIds(), true) : null,
    });
  }
  return {
    name: job.name,
    vocab_size: t.getVocabSize(true),
    base_vocab_size: t.getVocabSize(false),
    vocab: t.getVocab(true),
    encodings,
  };
}

const request = JSON.parse(readFileSync(0, 'utf8'));
const answers = [];
for (const job of request.tokenizers) answers.push(await run(job));
process.stdout.write(JSON.stringify({ library: `tokenizers ${version}`, tokenizers: answers }) + '\n');
