// controls.mjs - golden token ids of NUL and the other control characters
// for tests/integration/test_controls.c, from the tokenizers library (the
// Rust crate through its own Node binding, tests/models/tokenize's
// package) on the test checkpoints' tokenizers, as transformers' fast
// tokenizers build them:
//
//   (cd tests/models/tokenize && npm ci)
//   node tests/tokenizers/controls.mjs > tests/tokenizers/controls.json
//
// run from the repository's root. For each checkpoint and each text (also
// as hex UTF-8: a C string cannot hold a NUL) the ids without the
// post-processor's tokens. BERT's folder has only vocab.txt: its
// tokenizer is the library's WordPiece behind BertNormalizer (clean_text,
// Chinese characters, lowercase and accents as do_lower_case says),
// BertPreTokenizer, as transformers' BertTokenizerFast builds it.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(
  new URL("../models/tokenize/package.json", import.meta.url),
);
const tk = require("tokenizers");
const version = require("tokenizers/package.json").version;

// the C0 controls and DEL
const CONTROLS = [...Array(32).keys(), 0x7f].map((c) =>
  String.fromCharCode(c),
);
const TEXTS = [
  ...CONTROLS, // each alone
  ...CONTROLS.map((c) => "w" + c + "w"), // each inside a word
  "a\u0000b",
  "\u0000start mid\u0000dle end\u0000",
  "\u0000\u0000 \u0000",
  CONTROLS.join(""),
  "a \u0000 b\u0001 \u007fc\t\u0000\n",
];

const FOLDERS = [
  { name: "bert", kind: "wordpiece", dir: "tests/models/f32" },
  {
    name: "gpt2",
    kind: "gpt2",
    dir: "tests/models/gpt2",
    special: ["<|endoftext|>"],
  },
  { name: "llama3", dir: "tests/models/llama3" },
  { name: "qwen2", dir: "tests/models/qwen2" },
  { name: "mistral", dir: "tests/models/mistral" },
  { name: "phi3", dir: "tests/models/phi3" },
];

async function load(f) {
  if (f.kind === "wordpiece") {
    const lower = JSON.parse(
      readFileSync(`${f.dir}/tokenizer_config.json`, "utf8"),
    ).do_lower_case;
    const model = await tk.WordPiece.fromFile(`${f.dir}/vocab.txt`, {
      unkToken: "[UNK]",
    });
    const t = new tk.Tokenizer(model);
    t.setNormalizer(tk.bertNormalizer(true, true, lower, lower));
    t.setPreTokenizer(tk.bertPreTokenizer());
    return t;
  }
  if (f.kind === "gpt2") {
    const model = await tk.BPE.fromFile(
      `${f.dir}/vocab.json`,
      `${f.dir}/merges.txt`,
      { continuingSubwordPrefix: "", endOfWordSuffix: "", fuseUnk: false },
    );
    const t = new tk.Tokenizer(model);
    t.setPreTokenizer(tk.byteLevelPreTokenizer(false, true));
    t.addSpecialTokens(f.special);
    return t;
  }
  return tk.Tokenizer.fromFile(`${f.dir}/tokenizer.json`);
}

const out = { library: `tokenizers ${version}`, tokenizers: [] };
for (const f of FOLDERS) {
  const t = await load(f);
  const cases = [];
  for (const text of TEXTS) {
    const enc = await t.encode(text, null, { addSpecialTokens: false });
    cases.push({
      utf8_hex: Buffer.from(text, "utf8").toString("hex"),
      ids: enc.getIds(),
    });
  }
  out.tokenizers.push({ name: f.name, dir: f.dir, cases });
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
