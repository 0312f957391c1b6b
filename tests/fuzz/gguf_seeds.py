#!/usr/bin/python3
"""Write the seed corpus of fuzz_gguf (tests/fuzz/corpus_gguf/): good GGUF
files of versions 2 and 3 and one of each malformed kind the reader
refuses. Run from the repository root: /usr/bin/python3 tests/fuzz/gguf_seeds.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_gguf")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
       F32: "<f", BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type: (values per block, bytes per block)
GGML = {0: (1, 4), 1: (1, 2), 2: (32, 18), 8: (32, 34), 12: (256, 144),
        14: (256, 210), 30: (1, 2)}


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return s(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(
            value(et, x) for x in items)
    return struct.pack(FMT[t], v)


def kv(key, t, v):
    return s(key) + struct.pack("<I", t) + value(t, v)


def info(name, dims, t, offset):
    return (s(name) + struct.pack("<I", len(dims)) +
            b"".join(struct.pack("<Q", d) for d in dims) +
            struct.pack("<IQ", t, offset))


def nbytes(dims, t):
    block, size = GGML[t]
    n = 1
    for d in dims:
        n *= d
    return n // block * size


def gguf(kvs, tensors, version=3, align=32, n_kv=None, n_tensors=None,
         pad=True, data_extra=0):
    """tensors: (name, dims, type), laid out in order, each aligned."""
    out = b"GGUF" + struct.pack("<IQQ", version,
                                len(tensors) if n_tensors is None else n_tensors,
                                len(kvs) if n_kv is None else n_kv)
    out += b"".join(kvs)
    offset, infos, data = 0, b"", b""
    for name, dims, t in tensors:
        offset = (offset + align - 1) // align * align
        infos += info(name, dims, t, offset)
        data = data.ljust(offset, b"\0") + bytes(
            i & 0xff for i in range(nbytes(dims, t)))
        offset = len(data)
    out += infos
    if pad:
        out = out.ljust((len(out) + align - 1) // align * align, b"\0")
    return out + data + b"\0" * data_extra


ARCH = kv("general.architecture", STR, "llama")
TOKENS = kv("tokenizer.ggml.tokens", ARR, (STR, ["<s>", "a", "b\u00e9", ""]))
SCORES = kv("tokenizer.ggml.scores", ARR, (F32, [0.0, -1.5, 2.0, 3.0]))
T2 = [("token_embd.weight", [32, 4], 0), ("blk.0.attn_q.weight", [32, 2], 1)]


def header(version, n_tensors, n_kv):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


SEEDS = {
    "good_v3.gguf": gguf([ARCH, TOKENS, SCORES], T2),
    "good_v2.gguf": gguf([ARCH, kv("llama.block_count", U32, 1)], T2, 2),
    "good_empty.gguf": header(3, 0, 0),
    "good_vocab_only.gguf": gguf([ARCH, TOKENS, SCORES], [], pad=False),
    "good_align64.gguf": gguf([kv("general.alignment", U32, 64), ARCH], T2,
                              align=64),
    "good_quant.gguf": gguf([ARCH], [("q8", [64, 2], 8), ("q4k", [256], 12),
                                     ("q6k", [256, 2], 14), ("q40", [32], 2),
                                     ("bf", [3, 3], 30)]),
    "good_all_types.gguf": gguf(
        [kv("u8", U8, 200), kv("i8", I8, -5), kv("u16", U16, 60000),
         kv("i16", I16, -3), kv("u32", U32, 7), kv("i32", I32, -7),
         kv("f32", F32, 0.5), kv("b", BOOL, 1), kv("str", STR, "x"),
         kv("u64", U64, 1 << 40), kv("i64", I64, -1), kv("f64", F64, 0.25),
         kv("arr", ARR, (I16, [1, -2, 3])), kv("bools", ARR, (BOOL, [0, 1]))],
        [("t", [8], 0)]),
    "bad_magic.gguf": b"GGUG" + header(3, 0, 0)[4:],
    "bad_version1.gguf": header(1, 0, 0),
    "bad_version4.gguf": header(4, 0, 0),
    "bad_kv_count_huge.gguf": header(3, 0, 1 << 60) + ARCH,
    "bad_tensor_count_huge.gguf": header(3, 1 << 40, 0) + b"\0" * 40,
    "bad_string_huge.gguf": header(3, 0, 1) + struct.pack("<Q", 1 << 62)
    + b"abcdefghijklmn",
    "bad_value_type.gguf": header(3, 0, 1) + s("k") + struct.pack("<IQ", 13, 0),
    "bad_key_utf8.gguf": header(3, 0, 1) + s(b"k\xff") + struct.pack("<IB", 0, 0),
    "bad_key_long.gguf": header(3, 0, 1) + kv("k" * 300, U8, 0),
    "bad_dup_key.gguf": gguf([ARCH, kv("a", U8, 1), ARCH], []),
    "bad_dup_tensor.gguf": gguf([], [("x", [8], 0), ("x", [8], 0)]),
    "bad_bool.gguf": header(3, 0, 1) + s("b") + struct.pack("<IB", BOOL, 2),
    "bad_nested_array.gguf": header(3, 0, 1) + s("a")
    + struct.pack("<IIQ", ARR, ARR, 1) + struct.pack("<IQ", U8, 0),
    "bad_array_huge.gguf": header(3, 0, 1) + s("a")
    + struct.pack("<IIQ", ARR, STR, 1 << 58) + b"\0" * 16,
    "bad_alignment.gguf": gguf([kv("general.alignment", U32, 48)], T2),
    "bad_alignment_type.gguf": gguf([kv("general.alignment", U64, 64)], T2),
    "bad_ggml_type.gguf": header(3, 1, 0) + info("x", [32], 99, 0)
    + b"\0" * 128,
    "bad_dims5.gguf": header(3, 1, 0) + info("x", [1] * 5, 0, 0) + b"\0" * 64,
    "bad_dim0.gguf": header(3, 1, 0) + info("x", [4, 0], 0, 0) + b"\0" * 64,
    "bad_dims_overflow.gguf": header(3, 1, 0)
    + info("x", [1 << 32, 1 << 32, 2], 0, 0) + b"\0" * 64,
    "bad_row_blocks.gguf": header(3, 1, 0) + info("x", [32], 12, 0)
    + b"\0" * 200,
    "bad_offset_unaligned.gguf": header(3, 1, 0) + info("x", [4], 0, 16)
    + b"\0" * 64,
    "bad_past_end.gguf": gguf([], [("x", [32, 2], 0)])[:-1],
    "bad_overlap.gguf": header(3, 2, 0) + info("x", [64], 0, 0)
    + info("y", [64], 0, 128) + b"\0" * 512,
    "bad_name_long.gguf": header(3, 1, 0) + info("n" * 65, [4], 0, 0)
    + b"\0" * 64,
    "bad_truncated.gguf": gguf([ARCH, TOKENS], [])[:100],
}

os.makedirs(OUT, exist_ok=True)
for name, data in sorted(SEEDS.items()):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
