// run.json helpers (see run_manifest.h): hashing with OpenSSL EVP, time, host, build info, JSON views.
// Kept separate from generate.cpp so other front ends (bench, serve) can write the same manifest.
// Tested through tests/cli/cli_test.cpp.
#include "engine/run_manifest.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "vortex/build_info.h"

namespace vortex {
namespace {

std::string to_hex(const unsigned char* digest, unsigned int len) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  s.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    s.push_back(kHex[digest[i] >> 4]);
    s.push_back(kHex[digest[i] & 15]);
  }
  return s;
}

using EvpCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

}  // namespace

std::string sha256_hex(const void* data, size_t bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, bytes, digest, &len, EVP_sha256(), nullptr);
  return to_hex(digest, len);
}

Result<std::string> sha256_file(const std::string& path) {
  FILE* fp = std::fopen(path.c_str(), "rb");
  if (!fp) return not_found("cannot open " + path + " to hash it");
  EvpCtx ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    std::fclose(fp);
    return internal_error("OpenSSL EVP sha256 init failed");
  }
  std::vector<unsigned char> buf(1 << 20);
  size_t got = 0;
  while ((got = std::fread(buf.data(), 1, buf.size(), fp)) > 0) {
    EVP_DigestUpdate(ctx.get(), buf.data(), got);
  }
  const bool read_error = std::ferror(fp) != 0;
  std::fclose(fp);
  if (read_error) return io_error("read error while hashing " + path);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) return internal_error("OpenSSL EVP sha256 final failed");
  return to_hex(digest, len);
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

nlohmann::ordered_json build_info_json() {
  return {{"version", VORTEX_VERSION_STRING}, {"git_commit", VORTEX_GIT_COMMIT_STRING}};
}

nlohmann::ordered_json world_json(const Communicator* comm) {
  using J = nlohmann::ordered_json;
  return {{"world_size", comm != nullptr ? comm->size() : 1},
          {"parallelism", comm != nullptr ? "ulysses" : "none"},
          {"communicator", comm != nullptr ? J(std::string(comm->name())) : J(nullptr)}};
}

nlohmann::ordered_json model_config_json(const ModelConfig& c) {
  return {{"name", c.name},
          {"num_layers", c.num_layers},
          {"num_refiner_layers", c.num_refiner_layers},
          {"hidden", c.hidden},
          {"num_heads", c.num_heads},
          {"head_dim", c.head_dim},
          {"ffn", c.ffn},
          {"patch", {c.patch_t, c.patch_h, c.patch_w}},
          {"in_channels", c.in_channels},
          {"audio_in_channels", c.audio_in_channels},
          {"text_dim", c.text_dim},
          {"freq_dim", c.freq_dim},
          {"time_embed_hidden", c.time_embed_hidden},
          {"time_embed_dim", c.time_embed_dim},
          {"rope_inv_freq_len", c.rope_inv_freq_len},
          {"rope_theta", c.rope_theta},
          {"norm_eps", c.norm_eps},
          {"qk_norm_eps", c.qk_norm_eps},
          {"final_norm_eps", c.final_norm_eps},
          {"video_shift", c.video_shift},
          {"audio_shift", c.audio_shift}};
}

nlohmann::ordered_json geometry_json(const RequestGeometry& g) {
  return {{"width", g.width},
          {"height", g.height},
          {"frames", g.frames},
          {"latent_frames", g.latent_frames},
          {"latent_h", g.latent_h},
          {"latent_w", g.latent_w},
          {"video_rows", g.video_rows},
          {"audio_latents", g.audio_latents},
          {"audio_rows", g.audio_rows},
          {"text_rows", g.text_rows},
          {"total_rows", g.total_rows()}};
}

Status write_json_file(const nlohmann::ordered_json& j, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return io_error("cannot create " + path + " (check the directory is writable)");
  f << j.dump(2) << "\n";
  f.close();
  if (!f) return io_error("writing " + path + " failed (disk full?)");
  return Status::Ok();
}

}  // namespace vortex
