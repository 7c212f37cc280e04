// Byte-level BPE tokenizer over an HF tokenizer.json; see tokenizer.h. The BPE works on raw bytes: the
// file's byte-level alphabet (GPT-2's bytes_to_unicode) is undone once at load time, so encoding never
// builds the remapped strings HF does.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer.h"

#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "text/utf8.h"

namespace vortex {

using json = nlohmann::json;

namespace {

constexpr uint32_t kNoRank = UINT32_MAX;
// Pieces up to this many bytes merge by linear scans (cheaper than a heap for the short pieces that
// make up prompts); longer ones (whitespace or letter runs) use the O(n log n) heap.
constexpr size_t kLinearMergeMaxBytes = 64;
// Inputs from this size on memoize merged pieces for the call: the 100 KB corpus prompt goes from 14 to
// 38 MB/s, while the corpus's ~45-byte strings lose a quarter to the map's allocations (tokenizer_bench).
constexpr size_t kPieceCacheMinBytes = 1024;

// GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 to U+0100 upwards.
std::array<uint32_t, 256> byte_to_codepoint() {
  std::array<uint32_t, 256> map{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    map[b] = printable ? b : next++;
  }
  return map;
}

// Open-addressing map (left id, right id) -> (merge rank, merged id): the BPE inner loop's only lookup.
class MergeTable {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    int bits = 4;
    for (; cap < 2 * n; cap <<= 1) ++bits;
    slots_.assign(cap, Slot{kEmpty, 0, 0});
    mask_ = cap - 1;
    shift_ = 64 - bits;
  }
  // A repeated pair keeps the later rank, as HF's BPE builder does.
  void insert(int32_t a, int32_t b, uint32_t rank, int32_t merged) {
    const uint64_t key = pack(a, b);
    for (size_t i = hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty || slots_[i].key == key) {
        slots_[i] = Slot{key, rank, merged};
        return;
      }
    }
  }
  // Rank of merging (a, b), kNoRank when the file has no such merge; *merged receives the result id.
  uint32_t find(int32_t a, int32_t b, int32_t* merged) const {
    const uint64_t key = pack(a, b);
    for (size_t i = hash(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) {
        *merged = s.merged;
        return s.rank;
      }
      if (s.key == kEmpty) return kNoRank;
    }
  }

 private:
  struct Slot {
    uint64_t key;
    uint32_t rank;
    int32_t merged;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // Fibonacci hashing: the product's top bits mix both ids (its low bits would depend on one only).
  size_t hash(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 60;
};

struct PcreCodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct PcreMatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

const icu::Normalizer2* nfc_instance(Status* error) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err) || nfc == nullptr) {
    *error = internal_error(std::string("ICU NFC normalizer unavailable: ") + u_errorName(err));
    return nullptr;
  }
  return nfc;
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

// NFC of valid UTF-8. ASCII is its own NFC, the common case that skips ICU entirely.
Status nfc_into(std::string_view in, std::string& out) {
  out.clear();
  if (is_ascii(in)) {
    out.assign(in);
    return Status::Ok();
  }
  Status error;
  const icu::Normalizer2* nfc = nfc_instance(&error);
  if (!nfc) return error;
  UErrorCode err = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(in.size()));
  nfc->normalizeUTF8(0, icu::StringPiece(in.data(), static_cast<int32_t>(in.size())), sink, nullptr, err);
  if (U_FAILURE(err)) return internal_error(std::string("ICU NFC normalization failed: ") + u_errorName(err));
  return Status::Ok();
}

}  // namespace

struct Tokenizer::Impl {
  std::string origin;
  bool nfc = false;
  bool ignore_merges = false;
  std::string normalizer_name = "none";
  std::string pattern;
  std::unique_ptr<pcre2_code, PcreCodeDeleter> regex;
  bool jit = false;

  std::array<int32_t, 256> byte_id{};  // id of each single-byte token
  MergeTable merges;
  StringIdMap vocab;                   // tokenizer.json spelling -> id (token_id)
  StringIdMap bytes_to_id;             // raw bytes -> id (ignore_merges whole-piece lookups)
  std::vector<std::string> id_bytes;   // id -> raw bytes (decode); added tokens hold their content
  std::vector<std::string> id_string;  // id -> tokenizer.json spelling
  std::vector<uint8_t> defined;        // id -> 1 when some entry defines it
  std::vector<AddedToken> added;
  std::vector<int8_t> is_special;  // id -> 1 when it is a special added token
  int32_t vocab_size = 0;

  // Added tokens grouped by first byte, longest first: the leftmost-longest literal scan.
  std::array<std::vector<size_t>, 256> raw_by_first;
  std::array<std::vector<size_t>, 256> norm_by_first;
  std::vector<std::string> norm_content;  // NFC of each normalized added token's content

  struct Scratch {
    std::deque<std::string> normalized;  // NFC of each span; kept for the call (the cache views into them)
    std::vector<int32_t> sym;
    std::vector<uint32_t> rank;
    std::vector<int32_t> merged;
    std::vector<int32_t> prev, next;
    std::vector<uint64_t> heap;
    // Pieces already merged in this call -> (offset, count) in cached_ids: prompts repeat words.
    std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
    std::vector<int32_t> cached_ids;
    bool use_cache = false;
    std::unique_ptr<pcre2_match_data, PcreMatchDataDeleter> match;
  };

  Status encode_span(std::string_view raw, bool split_special, Scratch& s, std::vector<int32_t>& out) const;
  Status encode_normalized(std::string_view text, bool split_special, Scratch& s, std::vector<int32_t>& out) const;
  Status pretokenize_and_merge(std::string_view text, Scratch& s, std::vector<int32_t>& out) const;
  void bpe(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const;
  void bpe_linear(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const;
  void bpe_heap(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const;
  // Leftmost-longest added token in text[from..): position and index into `added`, or npos.
  size_t find_added(std::string_view text, size_t from, bool normalized_pass, bool split_special, size_t* which) const;
};

namespace {

// Parsing -----------------------------------------------------------------------------------------

Status refuse(const std::string& origin, const std::string& what) {
  return unsupported(origin + ": " + what + "; Vortex reads byte-level BPE tokenizers in the Qwen2 format");
}

bool is_null_or_absent(const json& j, const char* key) { return !j.contains(key) || j[key].is_null(); }

Status parse_normalizer(const json& j, Tokenizer::Impl& t) {
  if (is_null_or_absent(j, "normalizer")) return Status::Ok();
  const json& n = j["normalizer"];
  auto one = [&](const json& item) -> Status {
    const std::string type = item.value("type", "");
    if (type == "NFC") {
      t.nfc = true;
      t.normalizer_name = "NFC";
      return Status::Ok();
    }
    return refuse(t.origin, "normalizer \"" + type + "\" is not supported (only NFC)");
  };
  if (n.value("type", "") == "Sequence") {
    for (const json& item : n.value("normalizers", json::array())) VORTEX_RETURN_IF_ERROR(one(item));
    return Status::Ok();
  }
  return one(n);
}

// The GPT-2 regex ByteLevel(use_regex=true) applies on its own.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Status parse_byte_level(const json& b, Tokenizer::Impl& t, bool* uses_regex) {
  if (b.value("add_prefix_space", false))
    return refuse(t.origin, "ByteLevel pre-tokenizer with add_prefix_space=true is not supported");
  *uses_regex = b.value("use_regex", true);
  return Status::Ok();
}

Status parse_pretokenizer(const json& j, Tokenizer::Impl& t) {
  if (is_null_or_absent(j, "pre_tokenizer"))
    return refuse(t.origin, "no pre_tokenizer (byte-level BPE needs ByteLevel)");
  const json& p = j["pre_tokenizer"];
  std::vector<json> steps;
  if (p.value("type", "") == "Sequence")
    for (const json& s : p.value("pretokenizers", json::array())) steps.push_back(s);
  else steps.push_back(p);
  bool split_seen = false, byte_level_seen = false;
  for (const json& s : steps) {
    const std::string type = s.value("type", "");
    if (type == "Split" && !split_seen && !byte_level_seen) {
      if (s.value("behavior", "") != "Isolated")
        return refuse(t.origin, "Split behavior \"" + s.value("behavior", "") + "\" is not supported (only Isolated)");
      if (s.value("invert", false)) return refuse(t.origin, "Split with invert=true is not supported");
      const json& pat = s.value("pattern", json::object());
      if (pat.contains("Regex") && pat["Regex"].is_string()) {
        t.pattern = pat["Regex"].get<std::string>();
      } else if (pat.contains("String") && pat["String"].is_string()) {
        // A literal: quote it for PCRE2.
        t.pattern = "\\Q" + pat["String"].get<std::string>() + "\\E";
      } else {
        return format_error(t.origin + ": Split pre-tokenizer without a Regex or String pattern");
      }
      split_seen = true;
    } else if (type == "ByteLevel" && !byte_level_seen) {
      bool uses_regex = true;
      VORTEX_RETURN_IF_ERROR(parse_byte_level(s, t, &uses_regex));
      if (uses_regex) {
        if (split_seen) return refuse(t.origin, "Split followed by ByteLevel(use_regex=true) is not supported");
        t.pattern = kGpt2Pattern;
      }
      byte_level_seen = true;
    } else {
      return refuse(t.origin, "pre-tokenizer step \"" + type +
                                  "\" is not supported here (expected Split(Regex, Isolated) then ByteLevel)");
    }
  }
  if (!byte_level_seen) return refuse(t.origin, "the pre-tokenizer has no ByteLevel step");
  if (t.pattern.empty()) return refuse(t.origin, "the pre-tokenizer has no splitting regex");
  return Status::Ok();
}

// \s and \S spelled as the Unicode White_Space property, which oniguruma (HF) and fancy-regex (tiktoken)
// use. PCRE2 10.42's \s also matches U+180E (a space before Unicode 6.3), so it is not left to PCRE2.
std::string spell_out_whitespace(const std::string& p) {
  static const std::string kWhiteSpace =
      "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char d = p[++i];
      if (d == 's') {
        out += in_class ? kWhiteSpace : "[" + kWhiteSpace + "]";
      } else if (d == 'S' && !in_class) {
        out += "[^" + kWhiteSpace + "]";
      } else if (d == 'Q') {  // \Q...\E: copied verbatim
        const size_t e = p.find("\\E", i + 1);
        const size_t stop = e == std::string::npos ? p.size() : e + 2;
        out += p.substr(i - 1, stop - (i - 1));
        i = stop - 1;
      } else {
        out += c;
        out += d;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ] is a literal
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

Status compile_pattern(Tokenizer::Impl& t) {
  int err = 0;
  PCRE2_SIZE at = 0;
  // UTF + UCP: \p{L} and case folding by Unicode properties, as in oniguruma / fancy-regex.
  const std::string pattern = spell_out_whitespace(t.pattern);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                   &err, &at, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return format_error(t.origin + ": pre-tokenizer regex does not compile: " + reinterpret_cast<const char*>(msg) +
                        " (offset " + std::to_string(at) + " of " + pattern + ")");
  }
  t.regex.reset(code);
  t.jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;  // JIT is optional: the interpreter is exact too
  return Status::Ok();
}

// A tokenizer.json vocab spelling back to raw bytes; false when it uses a character outside the alphabet.
bool spelling_to_bytes(std::string_view s, const std::array<int, 324>& cp_to_byte, std::string& out) {
  out.clear();
  int32_t i = 0;
  const auto n = static_cast<int32_t>(s.size());
  while (i < n) {
    UChar32 cp;
    U8_NEXT(reinterpret_cast<const uint8_t*>(s.data()), i, n, cp);
    if (cp < 0 || cp >= 324 || cp_to_byte[cp] < 0) return false;
    out.push_back(static_cast<char>(cp_to_byte[cp]));
  }
  return true;
}

Status define_id(Tokenizer::Impl& t, int64_t id, const std::string& spelling, std::string bytes) {
  if (id < 0 || id > INT32_MAX - 1)
    return format_error(t.origin + ": token id " + std::to_string(id) + " out of range");
  const auto i = static_cast<size_t>(id);
  if (i >= t.id_bytes.size()) {
    t.id_bytes.resize(i + 1);
    t.id_string.resize(i + 1);
    t.defined.resize(i + 1, 0);
  }
  t.id_bytes[i] = std::move(bytes);
  t.id_string[i] = spelling;
  t.defined[i] = 1;
  return Status::Ok();
}

Status parse_model(const json& j, Tokenizer::Impl& t) {
  if (!j.contains("model") || !j["model"].is_object()) return format_error(t.origin + ": no \"model\" object");
  const json& m = j["model"];
  const std::string type = m.value("type", "");
  if (type != "BPE") return refuse(t.origin, "model type \"" + type + "\" is not supported (only BPE)");
  if (!is_null_or_absent(m, "dropout") && m["dropout"].is_number() && m["dropout"].get<double>() != 0.0)
    return refuse(t.origin, "BPE dropout is not supported (encoding must be deterministic)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!is_null_or_absent(m, key) && !(m[key].is_string() && m[key].get<std::string>().empty()))
      return refuse(t.origin, std::string("BPE ") + key + " is not supported");
  if (m.value("byte_fallback", false)) return refuse(t.origin, "BPE byte_fallback is not supported");
  t.ignore_merges = m.value("ignore_merges", false);
  if (!m.contains("vocab") || !m["vocab"].is_object()) return format_error(t.origin + ": model.vocab is not an object");
  if (!m.contains("merges") || !m["merges"].is_array()) return format_error(t.origin + ": model.merges is not a list");

  const std::array<uint32_t, 256> b2c = byte_to_codepoint();
  std::array<int, 324> c2b;
  c2b.fill(-1);
  for (int b = 0; b < 256; ++b) c2b[b2c[b]] = b;

  t.vocab.reserve(m["vocab"].size());
  t.byte_id.fill(-1);
  std::string bytes;
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    if (!it.value().is_number_integer())
      return format_error(t.origin + ": vocab entry \"" + it.key() + "\" has no integer id");
    const int64_t id = it.value().get<int64_t>();
    if (!spelling_to_bytes(it.key(), c2b, bytes))
      return format_error(t.origin + ": vocab entry \"" + it.key() + "\" (id " + std::to_string(id) +
                          ") uses characters outside the byte-level alphabet");
    VORTEX_RETURN_IF_ERROR(define_id(t, id, it.key(), bytes));
    t.vocab.emplace(it.key(), static_cast<int32_t>(id));
    if (bytes.size() == 1) t.byte_id[static_cast<uint8_t>(bytes[0])] = static_cast<int32_t>(id);
    if (t.ignore_merges) t.bytes_to_id.emplace(bytes, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b)
    if (t.byte_id[b] < 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      return format_error(t.origin + ": the vocab has no token for byte " + hex +
                          " (a byte-level vocab covers all 256 bytes)");
    }

  const json& merges = m["merges"];
  t.merges.reserve(merges.size());
  uint32_t rank = 0;
  for (const json& mj : merges) {
    std::string a, b;
    if (mj.is_string()) {  // legacy "a b"
      const std::string& s = mj.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return format_error(t.origin + ": merge " + std::to_string(rank) + " \"" + s +
                            "\" is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {  // [a, b]
      a = mj[0].get<std::string>();
      b = mj[1].get<std::string>();
    } else {
      return format_error(t.origin + ": merge " + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
    }
    auto ia = t.vocab.find(a), ib = t.vocab.find(b), iab = t.vocab.find(a + b);
    if (ia == t.vocab.end() || ib == t.vocab.end() || iab == t.vocab.end())
      return format_error(t.origin + ": merge " + std::to_string(rank) + " (\"" + a + "\", \"" + b +
                          "\") uses or makes a token that is not in the vocab");
    t.merges.insert(ia->second, ib->second, rank, iab->second);
    ++rank;
  }
  return Status::Ok();
}

Status parse_added_tokens(const json& j, Tokenizer::Impl& t) {
  if (is_null_or_absent(j, "added_tokens")) return Status::Ok();
  if (!j["added_tokens"].is_array()) return format_error(t.origin + ": added_tokens is not a list");
  for (const json& a : j["added_tokens"]) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string())
      return format_error(t.origin + ": an added_tokens entry lacks an integer id or a string content");
    AddedToken tok;
    tok.id = static_cast<int32_t>(a["id"].get<int64_t>());
    tok.content = a["content"].get<std::string>();
    tok.special = a.value("special", false);
    tok.normalized = a.value("normalized", !tok.special);
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      if (a.value(flag, false))
        return refuse(t.origin, "added token \"" + tok.content + "\" sets " + flag + ", which is not supported");
    if (tok.content.empty()) return format_error(t.origin + ": an added token has empty content");
    VORTEX_RETURN_IF_ERROR(validate_utf8(tok.content).with_context(t.origin + ": added token"));
    VORTEX_RETURN_IF_ERROR(define_id(t, a["id"].get<int64_t>(), tok.content, tok.content));
    t.added.push_back(std::move(tok));
  }
  return Status::Ok();
}

Status parse_decoding(const json& j, Tokenizer::Impl& t) {
  for (const char* key : {"post_processor", "decoder"}) {
    if (is_null_or_absent(j, key)) continue;
    const std::string type = j[key].value("type", "");
    if (type != "ByteLevel")
      return refuse(t.origin, std::string(key) + " \"" + type + "\" is not supported (only ByteLevel or none)");
  }
  return Status::Ok();
}

void index_added(Tokenizer::Impl& t) {
  t.is_special.assign(t.id_bytes.size(), 0);
  t.norm_content.resize(t.added.size());
  for (size_t i = 0; i < t.added.size(); ++i) {
    const AddedToken& a = t.added[i];
    if (a.special) t.is_special[static_cast<size_t>(a.id)] = 1;
    if (a.normalized && t.nfc) {
      if (!nfc_into(a.content, t.norm_content[i]).ok()) t.norm_content[i] = a.content;
    } else {
      t.norm_content[i] = a.content;
    }
    auto& table = a.normalized ? t.norm_by_first : t.raw_by_first;
    table[static_cast<uint8_t>(t.norm_content[i][0])].push_back(i);
  }
  for (auto* tables : {&t.raw_by_first, &t.norm_by_first})
    for (auto& list : *tables)
      std::stable_sort(list.begin(), list.end(),
                       [&](size_t x, size_t y) { return t.norm_content[x].size() > t.norm_content[y].size(); });
}

}  // namespace

// Encoding ----------------------------------------------------------------------------------------

size_t Tokenizer::Impl::find_added(std::string_view text, size_t from, bool normalized_pass, bool split_special,
                                   size_t* which) const {
  const auto& table = normalized_pass ? norm_by_first : raw_by_first;
  for (size_t i = from; i < text.size(); ++i) {
    const auto& candidates = table[static_cast<uint8_t>(text[i])];
    for (size_t k : candidates) {
      if (split_special && added[k].special) continue;
      const std::string& c = norm_content[k];
      if (text.size() - i >= c.size() && std::memcmp(text.data() + i, c.data(), c.size()) == 0) {
        *which = k;
        return i;
      }
    }
  }
  return std::string_view::npos;
}

Status Tokenizer::Impl::encode_span(std::string_view raw, bool split_special, Scratch& s,
                                    std::vector<int32_t>& out) const {
  // Non-normalized added tokens are matched in the raw input, before normalization (HF AddedVocabulary).
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t which = 0;
    const size_t at = find_added(raw, pos, /*normalized_pass=*/false, split_special, &which);
    const size_t end = at == std::string_view::npos ? raw.size() : at;
    if (end > pos) {
      if (nfc) {
        std::string& normalized = s.normalized.emplace_back();
        VORTEX_RETURN_IF_ERROR(nfc_into(raw.substr(pos, end - pos), normalized));
        VORTEX_RETURN_IF_ERROR(encode_normalized(normalized, split_special, s, out));
      } else {
        VORTEX_RETURN_IF_ERROR(encode_normalized(raw.substr(pos, end - pos), split_special, s, out));
      }
    }
    if (at == std::string_view::npos) break;
    out.push_back(added[which].id);
    pos = at + added[which].content.size();
  }
  return Status::Ok();
}

Status Tokenizer::Impl::encode_normalized(std::string_view text, bool split_special, Scratch& s,
                                          std::vector<int32_t>& out) const {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t which = 0;
    const size_t at = find_added(text, pos, /*normalized_pass=*/true, split_special, &which);
    const size_t end = at == std::string_view::npos ? text.size() : at;
    if (end > pos) VORTEX_RETURN_IF_ERROR(pretokenize_and_merge(text.substr(pos, end - pos), s, out));
    if (at == std::string_view::npos) break;
    out.push_back(added[which].id);
    pos = at + norm_content[which].size();
  }
  return Status::Ok();
}

Status Tokenizer::Impl::pretokenize_and_merge(std::string_view text, Scratch& s, std::vector<int32_t>& out) const {
  if (!s.match) s.match.reset(pcre2_match_data_create_from_pattern(regex.get(), nullptr));
  if (!s.match) return Status(ErrorCode::kOutOfMemory, "pcre2_match_data_create failed");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t len = text.size();
  size_t off = 0, emitted = 0;
  while (off < len) {
    // The text was validated as UTF-8 once, up front: skip PCRE2's per-call check.
    int rc = jit ? pcre2_jit_match(regex.get(), subject, len, off, PCRE2_NO_UTF_CHECK, s.match.get(), nullptr)
                 : PCRE2_ERROR_JIT_STACKLIMIT;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // a pathological piece: the interpreter has no stack limit issue
      rc = pcre2_match(regex.get(), subject, len, off, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s.match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return internal_error(std::string("pre-tokenizer regex match failed: ") + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.match.get());
    const size_t start = ov[0], end = ov[1];
    if (end == start) {  // empty match: step over one code point (HF's Split drops empty matches)
      off = start + 1;
      while (off < len && (static_cast<uint8_t>(text[off]) & 0xC0) == 0x80) ++off;
      continue;
    }
    if (start > emitted) bpe(text.substr(emitted, start - emitted), s, out);  // Isolated: gaps are pieces too
    bpe(text.substr(start, end - start), s, out);
    emitted = off = end;
  }
  if (emitted < len) bpe(text.substr(emitted), s, out);
  return Status::Ok();
}

void Tokenizer::Impl::bpe(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_id[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (ignore_merges) {
    auto it = bytes_to_id.find(piece);
    if (it != bytes_to_id.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (piece.size() > kLinearMergeMaxBytes) {
    bpe_heap(piece, s, out);
    return;
  }
  if (!s.use_cache) {
    bpe_linear(piece, s, out);
    return;
  }
  // The views point into the text being encoded, which outlives the call's cache.
  auto [it, fresh] = s.cache.try_emplace(piece, 0u, 0u);
  if (!fresh) {
    out.insert(out.end(), s.cached_ids.begin() + it->second.first,
               s.cached_ids.begin() + it->second.first + it->second.second);
    return;
  }
  const size_t before = out.size();
  bpe_linear(piece, s, out);
  it->second = {static_cast<uint32_t>(s.cached_ids.size()), static_cast<uint32_t>(out.size() - before)};
  s.cached_ids.insert(s.cached_ids.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
}

// Repeatedly merge the lowest-rank adjacent pair (leftmost on ties), as HF's BPE::merge_word does.
void Tokenizer::Impl::bpe_linear(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
  size_t n = piece.size();
  s.sym.resize(n);
  s.rank.resize(n);
  s.merged.resize(n);
  int32_t* sym = s.sym.data();
  uint32_t* rank = s.rank.data();
  int32_t* merged = s.merged.data();
  for (size_t i = 0; i < n; ++i) sym[i] = byte_id[static_cast<uint8_t>(piece[i])];
  for (size_t i = 0; i + 1 < n; ++i) rank[i] = merges.find(sym[i], sym[i + 1], &merged[i]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == kNoRank) break;
    sym[best] = merged[best];
    std::memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof(int32_t));
    std::memmove(rank + best + 1, rank + best + 2, (n - best - 2) * sizeof(uint32_t));
    std::memmove(merged + best + 1, merged + best + 2, (n - best - 2) * sizeof(int32_t));
    --n;
    if (best > 0) rank[best - 1] = merges.find(sym[best - 1], sym[best], &merged[best - 1]);
    if (best + 1 < n) rank[best] = merges.find(sym[best], sym[best + 1], &merged[best]);
  }
  out.insert(out.end(), sym, sym + n);
}

// The same merge order with a min-heap of candidate pairs over a linked list of symbols: O(n log n).
// A candidate is (rank << 32 | left position): ties go to the leftmost. It is stale when the pair now at
// its position has another rank (merge ranks are unique, so an equal rank is the same pair).
void Tokenizer::Impl::bpe_heap(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
  const size_t n = piece.size();
  s.sym.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  int32_t* sym = s.sym.data();
  int32_t* next = s.next.data();
  int32_t* prev = s.prev.data();
  for (size_t i = 0; i < n; ++i) {
    sym[i] = byte_id[static_cast<uint8_t>(piece[i])];
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  std::vector<uint64_t>& heap = s.heap;
  heap.clear();
  auto push = [&](int32_t pos) {
    const int32_t r = next[pos];
    if (r < 0) return;
    int32_t m = 0;
    const uint32_t rk = merges.find(sym[pos], sym[r], &m);
    if (rk == kNoRank) return;
    heap.push_back((static_cast<uint64_t>(rk) << 32) | static_cast<uint32_t>(pos));
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (size_t i = 0; i + 1 < n; ++i) {
    int32_t m = 0;
    const uint32_t rk = merges.find(sym[i], sym[i + 1], &m);
    if (rk != kNoRank) heap.push_back((static_cast<uint64_t>(rk) << 32) | static_cast<uint32_t>(i));
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto pos = static_cast<int32_t>(top & 0xFFFFFFFFu);
    const int32_t r = next[pos];
    if (sym[pos] < 0 || r < 0) continue;
    int32_t m = 0;
    if (merges.find(sym[pos], sym[r], &m) != static_cast<uint32_t>(top >> 32)) continue;
    sym[pos] = m;
    sym[r] = -1;
    next[pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = pos;
    if (prev[pos] >= 0) push(prev[pos]);
    push(pos);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
}

// Public API --------------------------------------------------------------------------------------

Result<Tokenizer> Tokenizer::from_json(std::string_view json_text, std::string_view origin) {
  auto t = std::make_shared<Impl>();
  t->origin = std::string(origin);
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return format_error(t->origin + ": not a JSON object (tokenizer.json expected)");
  VORTEX_RETURN_IF_ERROR(parse_model(j, *t));
  VORTEX_RETURN_IF_ERROR(parse_normalizer(j, *t));
  VORTEX_RETURN_IF_ERROR(parse_pretokenizer(j, *t));
  VORTEX_RETURN_IF_ERROR(parse_decoding(j, *t));
  VORTEX_RETURN_IF_ERROR(parse_added_tokens(j, *t));
  VORTEX_RETURN_IF_ERROR(compile_pattern(*t));
  t->vocab_size = static_cast<int32_t>(t->id_bytes.size());
  index_added(*t);
  return Tokenizer(std::move(t));
}

Result<Tokenizer> Tokenizer::from_json_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return not_found("tokenizer file not found: " + path);
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot open " + path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return io_error("read failed: " + path);
  return from_json(text, path);
}

Result<std::string> Tokenizer::find_in_model_dir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return not_found("model folder not found: " + dir);
  std::string tried;
  for (const char* rel : {"tokenizer.json", "tokenizer/tokenizer.json", "text_encoder/tokenizer.json"}) {
    const std::string p = (std::filesystem::path(dir) / rel).string();
    if (std::filesystem::is_regular_file(p, ec)) return p;
    tried += (tried.empty() ? "" : ", ") + p;
  }
  return not_found("no tokenizer.json in " + dir + " (tried " + tried + ")");
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view utf8, const EncodeOptions& options) const {
  VORTEX_RETURN_IF_ERROR(validate_utf8(utf8));
  std::vector<int32_t> out;
  out.reserve(utf8.size() / 3 + 8);
  Impl::Scratch scratch;
  scratch.use_cache = utf8.size() >= kPieceCacheMinBytes;
  VORTEX_RETURN_IF_ERROR(impl_->encode_span(utf8, options.split_special_tokens, scratch, out));
  return out;
}

Result<std::vector<int32_t>> Tokenizer::encode_prompt(std::string_view utf8, const PromptLimits& limits,
                                                      const EncodeOptions& options) const {
  VORTEX_RETURN_IF_ERROR(validate_prompt(utf8, limits));
  VORTEX_ASSIGN_OR_RETURN(std::vector<int32_t> ids, encode(utf8, options));
  if (ids.size() > limits.max_tokens)
    return invalid_argument("the prompt is " + std::to_string(ids.size()) + " tokens, above the limit of " +
                            std::to_string(limits.max_tokens) +
                            (limits.max_tokens == kMaxPromptTokens ? " (Qwen3-VL's max_position_embeddings)" : "") +
                            "; shorten it");
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= impl_->vocab_size || !impl_->defined[static_cast<size_t>(id)])
      return invalid_argument("token id " + std::to_string(id) + " at position " + std::to_string(i) +
                              " is not in the vocabulary (size " + std::to_string(impl_->vocab_size) + ")");
    if (skip_special && impl_->is_special[static_cast<size_t>(id)]) continue;
    out += impl_->id_bytes[static_cast<size_t>(id)];
  }
  return out;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  for (const AddedToken& a : impl_->added)
    if (a.content == token) return a.id;
  auto it = impl_->vocab.find(token);
  if (it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

Result<std::string> Tokenizer::token_string(int32_t id) const {
  if (id < 0 || id >= impl_->vocab_size || !impl_->defined[static_cast<size_t>(id)])
    return invalid_argument("token id " + std::to_string(id) + " is not in the vocabulary");
  return impl_->id_string[static_cast<size_t>(id)];
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
const std::string& Tokenizer::normalizer_name() const { return impl_->normalizer_name; }
const std::string& Tokenizer::pretokenizer_pattern() const { return impl_->pattern; }

Status validate_prompt(std::string_view utf8, const PromptLimits& limits) {
  if (utf8.size() > limits.max_bytes)
    return invalid_argument("the prompt is " + std::to_string(utf8.size()) + " bytes, above the limit of " +
                            std::to_string(limits.max_bytes) + " bytes; shorten it");
  VORTEX_RETURN_IF_ERROR(validate_utf8(utf8).with_context("prompt"));
  int32_t i = 0;
  const auto n = static_cast<int32_t>(utf8.size());
  while (i < n) {
    UChar32 cp;
    U8_NEXT(reinterpret_cast<const uint8_t*>(utf8.data()), i, n, cp);
    if (!u_isUWhiteSpace(cp)) return Status::Ok();
  }
  return invalid_argument(utf8.empty() ? "the prompt is empty" : "the prompt is only whitespace");
}

Result<std::string> nfc_normalize(std::string_view utf8) {
  VORTEX_RETURN_IF_ERROR(validate_utf8(utf8));
  std::string out;
  VORTEX_RETURN_IF_ERROR(nfc_into(utf8, out));
  return out;
}

}  // namespace vortex
