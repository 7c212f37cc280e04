// WAV writer (see wav_writer.h). Little-endian host assumed (x86-64 / aarch64), checked at compile time.
#include "media/wav_writer.h"

#include <bit>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "media/atomic_file.h"

namespace vortex {
namespace {

static_assert(std::endian::native == std::endian::little, "the WAV writer stores host-order little-endian fields");

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void put_tag(std::vector<uint8_t>& b, const char* t) { b.insert(b.end(), t, t + 4); }

}  // namespace

Status write_wav_f32(const std::string& path, const Tensor& audio, int sample_rate) {
  if (!audio.defined() || audio.ndim() != 2 || audio.dtype() != DType::kF32 || !audio.is_contiguous() ||
      audio.dim(0) < 1 || audio.dim(0) > 8 || audio.dim(1) < 1)
    return invalid_argument("write_wav_f32: expected a contiguous [channels (1..8), samples] f32 tensor, got " +
                            (audio.defined() ? audio.describe() : std::string("nothing")));
  if (sample_rate <= 0) return invalid_argument("write_wav_f32: sample rate must be positive");
  const uint32_t ch = static_cast<uint32_t>(audio.dim(0));
  const uint64_t n = static_cast<uint64_t>(audio.dim(1));
  const uint64_t data_bytes = n * ch * 4;
  if (data_bytes > 0xFFFFFF00ull)
    return invalid_argument("write_wav_f32: more than 4 GiB of samples does not fit a WAV file");
  std::vector<uint8_t> h;
  put_tag(h, "RIFF");
  put_u32(h, static_cast<uint32_t>(4 + (8 + 16) + (8 + 4) + 8 + data_bytes));
  put_tag(h, "WAVE");
  put_tag(h, "fmt ");
  put_u32(h, 16);
  put_u16(h, 3);  // WAVE_FORMAT_IEEE_FLOAT
  put_u16(h, static_cast<uint16_t>(ch));
  put_u32(h, static_cast<uint32_t>(sample_rate));
  put_u32(h, static_cast<uint32_t>(sample_rate) * ch * 4);
  put_u16(h, static_cast<uint16_t>(ch * 4));
  put_u16(h, 32);
  put_tag(h, "fact");
  put_u32(h, 4);
  put_u32(h, static_cast<uint32_t>(n));
  put_tag(h, "data");
  put_u32(h, static_cast<uint32_t>(data_bytes));
  std::vector<float> inter(static_cast<size_t>(n * ch));
  const float* src = audio.data<float>();
  for (uint64_t i = 0; i < n; ++i)
    for (uint32_t c = 0; c < ch; ++c) inter[i * ch + c] = src[c * n + i];
  const std::string tmp = atomic_temp_path(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return io_error("could not create " + tmp);
  const bool ok = std::fwrite(h.data(), 1, h.size(), f) == h.size() &&
                  std::fwrite(inter.data(), 4, inter.size(), f) == inter.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    return io_error("could not write " + tmp + " (disk full?)");
  }
  return atomic_commit(tmp, path);
}

}  // namespace vortex
