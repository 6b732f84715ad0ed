#!/usr/bin/env python3
"""Turns text into token files for tpc-train (docs/training.md, "Token files"): a byte-level BPE
tokenizer learnt from the text itself (256 byte tokens plus VOCAB - 256 merges), or the
tokenizer of a Hugging Face tokenizer directory the user has (--hf DIR, needs `transformers`).

  python3 tools/tokenize.py --vocab 512 --out data/licenses /usr/share/common-licenses/*

writes data/licenses.train.bin and data/licenses.val.bin (the last --val-fraction of the tokens)
and data/licenses.tokenizer.json (the merges, so that text can be encoded and decoded again).
With no files it reads the Debian base-files package's license texts
(/usr/share/common-licenses), real English text present on every Debian machine. Plain Python
and NumPy-free: it runs with the system's python3.
"""
import argparse
import glob
import json
import os
import re
import struct
import sys
from collections import Counter

MAGIC = 20240520
DEFAULT_TEXTS = "/usr/share/common-licenses/*"
# Words with their leading space, runs of spaces, and everything else one character at a time:
# GPT-2's pre-tokenization, simplified. Merges never cross these pieces.
PIECE = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+")


def read_texts(paths):
    seen, out = set(), []
    for p in sorted(paths):
        real = os.path.realpath(p)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        with open(real, "rb") as f:
            out.append(f.read().decode("utf-8", errors="replace"))
    if not out:
        sys.exit("tokenize.py: error: no text files to read")
    return "\n\n".join(out)


def learn(text, vocab):
    """The merges of a byte-level BPE with |vocab| tokens: the most frequent adjacent pair first,
    ties to the smaller pair, so the same text always gives the same tokenizer."""
    words = Counter(PIECE.findall(text))
    seqs = {w: list(w.encode("utf-8")) for w in words}
    merges = []
    for new in range(256, vocab):
        pairs = Counter()
        for w, n in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        merges.append(best)
        for w in words:
            s = seqs[w]
            if len(s) < 2:
                continue
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return merges


def encode(text, merges):
    rank = {pair: 256 + i for i, pair in enumerate(merges)}
    cache, out = {}, []
    for w in PIECE.findall(text):
        if w not in cache:
            s = list(w.encode("utf-8"))
            while len(s) > 1:
                pair = min(zip(s, s[1:]), key=lambda p: rank.get(p, 1 << 30))
                if pair not in rank:
                    break
                t, i, merged = rank[pair], 0, []
                while i < len(s):
                    if i + 1 < len(s) and (s[i], s[i + 1]) == pair:
                        merged.append(t)
                        i += 2
                    else:
                        merged.append(s[i])
                        i += 1
                s = merged
            cache[w] = s
        out.extend(cache[w])
    return out


def write_tokens(path, tokens):
    wide = max(tokens, default=0) >= 1 << 16
    header = [MAGIC, 2 if wide else 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(tokens)}{'I' if wide else 'H'}", *tokens))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help=f"text files (default {DEFAULT_TEXTS})")
    ap.add_argument("--out", required=True, help="output prefix: PREFIX.train.bin, PREFIX.val.bin, PREFIX.tokenizer.json")
    ap.add_argument("--vocab", type=int, default=512, help="tokens of the learnt tokenizer (>= 256; default 512)")
    ap.add_argument("--hf", metavar="DIR", help="use this Hugging Face tokenizer directory instead of learning one")
    ap.add_argument("--val-fraction", type=float, default=0.1, help="the last part of the tokens held out (default 0.1)")
    ap.add_argument("--max-bytes", type=int, default=0, help="use only the first N bytes of the text (0: all)")
    a = ap.parse_args(argv)
    text = read_texts(a.files or glob.glob(DEFAULT_TEXTS))
    if a.max_bytes:
        text = text[:a.max_bytes]
    if a.hf:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(a.hf)
        tokens = tok.encode(text, add_special_tokens=False)
        meta = {"hf": os.path.abspath(a.hf), "vocab_size": len(tok)}
    else:
        if a.vocab < 256:
            sys.exit("tokenize.py: error: --vocab must be at least 256 (the byte tokens)")
        merges = learn(text, a.vocab)
        tokens = encode(text, merges)
        meta = {"vocab_size": 256 + len(merges), "merges": [list(m) for m in merges], "pieces": PIECE.pattern}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    split = len(tokens) - int(len(tokens) * a.val_fraction)
    write_tokens(a.out + ".train.bin", tokens[:split])
    write_tokens(a.out + ".val.bin", tokens[split:])
    with open(a.out + ".tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(meta, f)
    counts = Counter(tokens[:split])
    from math import log

    n = max(split, 1)
    entropy = -sum(c / n * log(c / n) for c in counts.values())
    print(f"tokenize.py: {len(text)} characters -> {len(tokens)} tokens (vocabulary {meta['vocab_size']}); "
          f"{a.out}.train.bin {split}, {a.out}.val.bin {len(tokens) - split}; unigram entropy {entropy:.4f} nats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
