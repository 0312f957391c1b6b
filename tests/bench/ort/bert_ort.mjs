// The ONNX Runtime side of build/bench_bert: one of bert_onnx.py's
// exports of the encoder, run by onnxruntime-node on its CPU execution
// provider with every graph optimization (ORT_ENABLE_ALL), 2 intra-op
// threads and 1 inter-op thread (sequential execution).
//
//   node tests/bench/ort/bert_ort.mjs MODEL.onnx
//
// It speaks the protocol of tests/bench/torch_protocol.py on stdin and
// stdout: a first line "onnxruntime-node VERSION ...", then one answer a
// command:
//
//   run N THREADS [IDS]   two passes over N wordpieces; prints the second's
//                         seconds. THREADS must be the session's intra-op
//                         threads (2): a session keeps the count it was
//                         made with.
//   dump N PATH [IDS]     the last hidden states [N][hidden] as float32
//                         into PATH; prints "ok"
//   attn N PATH [IDS]     (encoder-attn.onnx) every layer's attention
//                         [layers][heads][N][N] as float32 into PATH; "ok"
//
// The wordpieces are the bench's, id (7 i + 1000) % vocab at position i,
// or with IDS the N little-endian uint32 ids in that file. vocab is read
// from config.json beside MODEL. A failure to load prints nothing on
// stdout and exits 1, which the bench takes as ONNX Runtime missing.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';

const INTRA_THREADS = 2;

function fail(message) {
  process.stderr.write(`bert_ort.mjs: ${message}\n`);
  process.exit(1);
}

if (process.argv.length !== 3) fail('usage: bert_ort.mjs MODEL.onnx');
const modelPath = process.argv[2];

let ort;
try {
  ort = await import('onnxruntime-node');
} catch (e) {
  fail(`onnxruntime-node does not load: ${e.message.split('\n')[0]}`);
}

let vocab;
try {
  vocab = JSON.parse(readFileSync(join(dirname(modelPath), 'config.json'), 'utf8')).vocab_size;
} catch (e) {
  fail(`${join(dirname(modelPath), 'config.json')}: ${e.message.split('\n')[0]}`);
}

let session;
try {
  session = await ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: INTRA_THREADS,
    interOpNumThreads: 1,
  });
} catch (e) {
  fail(`${modelPath}: ${e.message.split('\n')[0]}`);
}

function tokenIds(words, n, at) {
  const ids = new BigInt64Array(n);
  if (words.length > at) {
    const bytes = readFileSync(words[at]);
    if (bytes.length !== 4 * n) fail(`${words[at]} holds ${bytes.length / 4} ids, not ${n}`);
    for (let i = 0; i < n; i++) ids[i] = BigInt(bytes.readUInt32LE(4 * i));
  } else {
    for (let i = 0; i < n; i++) ids[i] = BigInt((7 * i + 1000) % vocab);
  }
  return { input_ids: new ort.Tensor('int64', ids, [n]) };
}

function writeFloats(path, arrays) {
  const parts = arrays.map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength));
  writeFileSync(path, Buffer.concat(parts));
}

process.stdout.write(
  `onnxruntime-node ${ort.env.versions.node}, CPU, ORT_ENABLE_ALL, ` +
    `${INTRA_THREADS} intra-op threads, 1 inter-op, ` +
    `${session.outputNames.length} output(s)\n`,
);

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const words = line.trim().split(/\s+/);
  if (!words[0]) continue;
  const n = Number.parseInt(words[1], 10);
  if (words[0] === 'run') {
    if (Number.parseInt(words[2], 10) !== INTRA_THREADS)
      fail(`run on ${words[2]} threads: the session has ${INTRA_THREADS}`);
    const feeds = tokenIds(words, n, 3);
    // timed on the second pass in a row, as the bench times attnd
    await session.run(feeds);
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    const seconds = Number(process.hrtime.bigint() - t0) * 1e-9;
    process.stdout.write(`${seconds.toFixed(9)}\n`);
  } else if (words[0] === 'dump' || words[0] === 'attn') {
    const out = await session.run(tokenIds(words, n, 3));
    const names = session.outputNames;
    const wanted = words[0] === 'dump' ? names.slice(0, 1) : names.slice(1);
    if (!wanted.length) fail(`${modelPath} returns no attention`);
    writeFloats(words[2], wanted.map((name) => out[name].data));
    process.stdout.write('ok\n');
  } else {
    fail(`unknown command ${JSON.stringify(words[0])}`);
  }
}
