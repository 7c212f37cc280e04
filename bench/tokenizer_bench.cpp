// tokenizer_bench: single-thread tokenizer throughput (MB/s of UTF-8 input) on the parity corpus (all of it,
// its ordinary strings, its long single-character runs) and on the 100 KB corpus prompt, with the ids checked against
// the fixture's HF/tiktoken ids on the same inputs.
//   tokenizer_bench [tokenizer.json] [corpus.json] [long_corpus.json] [evidence.jsonl]
// Defaults: the Qwen fixture extracted by tests/text/tests.cmake. Prints one vortex-evidence-1 JSON line
// per workload (and appends them to evidence.jsonl when given). Run it pinned: taskset -c 0 tokenizer_bench.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiling/evidence.h"
#include "text/tokenizer.h"

#ifndef VORTEX_TEXT_QWEN_DIR
#error "VORTEX_TEXT_QWEN_DIR must name the extracted Qwen tokenizer fixture"
#endif
#ifndef VORTEX_TEXT_FIXTURES
#error "VORTEX_TEXT_FIXTURES must name tests/text/fixtures"
#endif

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The host's 1-minute load average: this machine is shared, so a number far above 1 flags a contended run.
double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = -1;
  f >> l;
  return l;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

struct Case {
  std::string name;
  std::string text;
  std::vector<int32_t> expected;
};

// Encodes every case once per repetition; returns the per-repetition milliseconds and whether all ids matched.
std::vector<double> time_cases(const vortex::Tokenizer& tok, const std::vector<Case>& cases, int reps, bool* ok) {
  *ok = true;
  for (const Case& c : cases) {  // warm-up + correctness on the timed inputs
    auto ids = tok.encode(c.text);
    if (!ids.ok() || *ids != c.expected) *ok = false;
  }
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    size_t sink = 0;
    const auto t0 = Clock::now();
    for (const Case& c : cases) sink += tok.encode(c.text).value().size();
    const auto t1 = Clock::now();
    if (sink == 0) *ok = false;
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string tok_path = argc > 1 ? argv[1] : std::string(VORTEX_TEXT_QWEN_DIR) + "/qwen_tokenizer.json";
  const std::string corpus_path = argc > 2 ? argv[2] : std::string(VORTEX_TEXT_FIXTURES) + "/qwen_corpus.json";
  const std::string long_path = argc > 3 ? argv[3] : std::string(VORTEX_TEXT_QWEN_DIR) + "/qwen_long_corpus.json";
  const std::string evidence = argc > 4 ? argv[4] : "";

  const auto l0 = Clock::now();
  vortex::Result<vortex::Tokenizer> tok = vortex::Tokenizer::from_json_file(tok_path);
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - l0).count();
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  auto load_cases = [](const std::string& path) {
    std::vector<Case> cases;
    json j = json::parse(read_file(path), nullptr, false);
    if (j.is_discarded()) return cases;
    for (const json& row : j["valid"])
      cases.push_back({row["name"], row["text"], row["hf_ids"].get<std::vector<int32_t>>()});
    return cases;
  };
  const std::vector<Case> corpus = load_cases(corpus_path), long_prompt = load_cases(long_path);
  // The corpus's 2-3 KB single-character runs (long_*_run) take the heap merge path: timed on their own too.
  std::vector<Case> runs, text;
  for (const Case& c : corpus) (c.name.rfind("long_", 0) == 0 ? runs : text).push_back(c);
  if (corpus.empty() || long_prompt.empty()) {
    std::fprintf(stderr, "tokenizer_bench: cannot read %s or %s\n", corpus_path.c_str(), long_path.c_str());
    return 2;
  }

  vortex::RunEnvironment env = vortex::collect_environment("", "", "");
  std::vector<json> rows;
  bool all_ok = true;
  using Workload = std::tuple<std::string, const std::vector<Case>*, int>;
  for (const auto& [name, cases, reps] :
       {Workload{"corpus", &corpus, 200}, Workload{"corpus_text", &text, 200}, Workload{"corpus_runs", &runs, 200},
        Workload{"prompt_100k", &long_prompt, 100}}) {
    size_t bytes = 0, tokens = 0;
    for (const Case& c : *cases) {
      bytes += c.text.size();
      tokens += c.expected.size();
    }
    bool ok = false;
    const vortex::Percentiles p = vortex::percentiles(time_cases(*tok, *cases, reps, &ok));
    all_ok = all_ok && ok;
    const double mb_s = static_cast<double>(bytes) / 1e6 / (p.p50 / 1e3);
    json extra = {
        {"bytes", bytes},
        {"tokens", tokens},
        {"strings", cases->size()},
        {"mb_per_s", mb_s},
        {"threads", 1},
        {"loadavg_1min", load_average()},
        {"mb_per_s_at_p10", static_cast<double>(bytes) / 1e6 / (p.p10 / 1e3)},
        {"cpu", cpu_model()},
        {"host", env.host},
        {"tokenizer_load_ms", load_ms},
        {"check", std::string("ids == HF tokenizers ids (fixture) on the timed inputs: ") + (ok ? "pass" : "FAIL")}};
    rows.push_back(vortex::evidence_row(env, "tokenize " + name + " (Qwen vocab, " + std::to_string(bytes) + " bytes)",
                                        "vortex text: pcre2 jit split + rank-table bpe", "threads=1", p, {}, extra));
    std::printf("%s\n", rows.back().dump().c_str());
    std::fprintf(stderr, "tokenize %-12s %8zu bytes %7zu tokens  p50 %8.3f ms  %7.2f MB/s  %s\n", name.c_str(), bytes,
                 tokens, p.p50, mb_s, ok ? "ids match" : "IDS DIFFER");
  }
  if (!evidence.empty()) {
    vortex::Status s = vortex::append_jsonl(evidence, rows);
    if (!s.ok()) {
      std::fprintf(stderr, "tokenizer_bench: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  return all_ok ? 0 : 1;
}
