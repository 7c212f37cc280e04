// The kind of a ref2va reference: an image, a video (with its soundtrack when it has one) or an audio clip. Its
// media checks and normalization are in src/media/reference_media.h, its block in the packed sequence in
// src/model/packing.h.
#pragma once

namespace vortex {

enum class ReferenceKind : int { kImage = 0, kVideo = 1, kAudio = 2 };

inline const char* reference_kind_name(ReferenceKind kind) {
  return kind == ReferenceKind::kImage ? "image" : kind == ReferenceKind::kVideo ? "video" : "audio";
}

}  // namespace vortex
