// Parse / print of the ExecOptions enums; see exec_options.h.
#include "backend/exec_options.h"

namespace vortex {

const char* attention_name(AttentionKind a) {
  switch (a) {
    case AttentionKind::kSdpa:
      return "sdpa";
    case AttentionKind::kSage2:
      return "sage2";
    case AttentionKind::kBf16Owned:
      return "bf16-owned";
  }
  return "?";
}

Result<AttentionKind> parse_attention(std::string_view name) {
  if (name == "sdpa") return AttentionKind::kSdpa;
  if (name == "sage2") return AttentionKind::kSage2;
  if (name == "bf16-owned") return AttentionKind::kBf16Owned;
  return invalid_argument("unknown attention '" + std::string(name) + "' (valid: sdpa, sage2, bf16-owned)");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kNvfp4:
      return "nvfp4";
    case Precision::kNvfp4WeightOnly:
      return "nvfp4-weight-only";
  }
  return "?";
}

Result<Precision> parse_precision(std::string_view name) {
  for (Precision p : {Precision::kBf16, Precision::kFp8, Precision::kNvfp4, Precision::kNvfp4WeightOnly})
    if (name == precision_name(p)) return p;
  return invalid_argument("unknown precision '" + std::string(name) + "' (valid: bf16, fp8, nvfp4, nvfp4-weight-only)");
}

const char* nvfp4_fc2_name(Nvfp4Fc2 f) {
  switch (f) {
    case Nvfp4Fc2::kW4A4:
      return "off";
    case Nvfp4Fc2::kWeightOnly:
      return "weight-only";
    case Nvfp4Fc2::kBf16:
      return "bf16";
  }
  return "?";
}

Result<Nvfp4Fc2> parse_nvfp4_fc2(std::string_view name) {
  for (Nvfp4Fc2 f : {Nvfp4Fc2::kW4A4, Nvfp4Fc2::kWeightOnly, Nvfp4Fc2::kBf16})
    if (name == nvfp4_fc2_name(f)) return f;
  return invalid_argument("nvfp4_fc2_fallback must be off, weight-only or bf16, got '" + std::string(name) + "'");
}

const char* cuda_graph_name(CudaGraphMode m) {
  switch (m) {
    case CudaGraphMode::kOff:
      return "off";
    case CudaGraphMode::kOn:
      return "on";
    case CudaGraphMode::kAuto:
      return "auto";
  }
  return "?";
}

Result<CudaGraphMode> parse_cuda_graph(std::string_view name) {
  for (CudaGraphMode m : {CudaGraphMode::kOff, CudaGraphMode::kOn, CudaGraphMode::kAuto})
    if (name == cuda_graph_name(m)) return m;
  return invalid_argument("cuda_graph must be off, on or auto, got '" + std::string(name) + "'");
}

}  // namespace vortex
