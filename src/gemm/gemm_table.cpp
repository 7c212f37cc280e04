// Pinned GEMM table (de)serialisation; see gemm_table.h. Strict parsing: a malformed file is a
// kFormat error naming the entry, never a silently ignored pin. Tested in tests/gemm/fp8_reference_test.cpp
// (GemmTable).
#include "gemm/gemm_table.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace vortex {

const GemmTableEntry* GemmTable::find(GemmPrecision precision, int64_t m, int64_t n, int64_t k, int64_t ldx,
                                      int64_t ldw, int64_t ldd, bool bias, const std::string& gpu,
                                      uint64_t cublaslt_version) const {
  for (const auto& e : entries)
    if (e.precision == precision && e.m == m && e.n == n && e.k == k && e.ldx == ldx && e.ldw == ldw && e.ldd == ldd &&
        e.bias == bias && e.gpu == gpu && e.cublaslt_version == cublaslt_version)
      return &e;
  return nullptr;
}

Result<GemmTable> parse_gemm_table(const std::string& json_text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    return format_error(std::string("GEMM table is not valid JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("schema", "") != "vortex.gemm_table.v1" || !j.contains("entries") ||
      !j["entries"].is_array())
    return format_error(
        "GEMM table must be an object with schema \"vortex.gemm_table.v1\" and an "
        "\"entries\" array; regenerate it with `vortex gemm-tune`");
  GemmTable table;
  size_t index = 0;
  for (const auto& e : j["entries"]) {
    try {
      GemmTableEntry entry;
      auto precision = gemm_precision_from_name(e.at("precision").get<std::string>());
      if (!precision.ok()) return precision.status().with_context("GEMM table entry " + std::to_string(index));
      entry.precision = *precision;
      entry.m = e.at("m").get<int64_t>();
      entry.n = e.at("n").get<int64_t>();
      entry.k = e.at("k").get<int64_t>();
      entry.ldx = e.at("ldx").get<int64_t>();
      entry.ldw = e.at("ldw").get<int64_t>();
      entry.ldd = e.at("ldd").get<int64_t>();
      entry.bias = e.at("bias").get<bool>();
      entry.gpu = e.at("gpu").get<std::string>();
      entry.cublaslt_version = e.at("cublaslt_version").get<uint64_t>();
      const auto& a = e.at("algo");
      entry.algo.algo_id = a.at("id").get<int>();
      entry.algo.tile_id = a.at("tile").get<int>();
      entry.algo.stages_id = a.at("stages").get<int>();
      entry.algo.splitk_num = a.at("splitk").get<int>();
      entry.algo.reduction_scheme = a.at("reduction").get<int>();
      entry.algo.cta_swizzling = a.at("swizzle").get<int>();
      entry.algo.custom_option = a.at("custom").get<int>();
      entry.algo.inner_shape_id = a.at("inner_shape").get<int>();
      entry.algo.cluster_shape_id = a.at("cluster_shape").get<int>();
      entry.evidence = e.value("evidence", "");
      table.entries.push_back(entry);
    } catch (const std::exception& ex) {
      return format_error("GEMM table entry " + std::to_string(index) + ": " + ex.what());
    }
    ++index;
  }
  return table;
}

Result<GemmTable> load_gemm_table(const std::string& path) {
  std::ifstream f(path);
  if (!f) return not_found("cannot open GEMM table '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  auto t = parse_gemm_table(ss.str());
  if (!t.ok()) return t.status().with_context(path);
  return t;
}

std::vector<std::string> builtin_gemm_table_texts();  // generated from src/gemm/tables/*.json

Result<GemmTable> builtin_gemm_table() {
  GemmTable all;
  for (const std::string& text : builtin_gemm_table_texts()) {
    auto t = parse_gemm_table(text);
    if (!t.ok()) return t.status().with_context("built-in GEMM table (src/gemm/tables/)");
    all.entries.insert(all.entries.end(), t->entries.begin(), t->entries.end());
  }
  return all;
}

std::string gemm_table_to_json(const GemmTable& table) {
  nlohmann::json j;
  j["schema"] = "vortex.gemm_table.v1";
  j["entries"] = nlohmann::json::array();
  for (const auto& e : table.entries) {
    nlohmann::json a = {{"id", e.algo.algo_id},
                        {"tile", e.algo.tile_id},
                        {"stages", e.algo.stages_id},
                        {"splitk", e.algo.splitk_num},
                        {"reduction", e.algo.reduction_scheme},
                        {"swizzle", e.algo.cta_swizzling},
                        {"custom", e.algo.custom_option},
                        {"inner_shape", e.algo.inner_shape_id},
                        {"cluster_shape", e.algo.cluster_shape_id}};
    j["entries"].push_back({{"precision", gemm_precision_name(e.precision)},
                            {"m", e.m},
                            {"n", e.n},
                            {"k", e.k},
                            {"ldx", e.ldx},
                            {"ldw", e.ldw},
                            {"ldd", e.ldd},
                            {"bias", e.bias},
                            {"gpu", e.gpu},
                            {"cublaslt_version", e.cublaslt_version},
                            {"algo", a},
                            {"evidence", e.evidence}});
  }
  return j.dump(2) + "\n";
}

Status save_gemm_table(const GemmTable& table, const std::string& path) {
  std::ofstream f(path);
  if (!f) return io_error("cannot write GEMM table '" + path + "'");
  f << gemm_table_to_json(table);
  if (!f) return io_error("write to '" + path + "' failed");
  return Status::Ok();
}

}  // namespace vortex
