// Names of the linear weight formats (src/backend/linear_weight.h), as ComfyUI's `comfy_quant` spells them.
#include "backend/linear_weight.h"

namespace vortex {

const char* quant_format_name(QuantFormat format) {
  switch (format) {
    case QuantFormat::kNone:
      return "none";
    case QuantFormat::kFp8Scaled:
      return "float8_e4m3fn";
    case QuantFormat::kNvfp4:
      return "nvfp4";
  }
  return "unknown";
}

}  // namespace vortex
