// Library-side entry points into libvortex_ffmpeg.so that are not a public media API: the module is
// loaded once by src/media/mp4_writer.cpp (see ffmpeg_plugin.h for the C interface). Callers get
// kUnsupported, naming what to install, when the module or FFmpeg's libraries are missing.
#pragma once

#include "media/ffmpeg_plugin.h"
#include "vortex/status.h"

namespace vortex {

// vortex_ffmpeg_decode_image through the loaded module (src/media/image_reader.cpp is the caller).
Status ffmpeg_decode_image(VortexImageDecode& request);
// vortex_ffmpeg_decode_audio through the loaded module (src/media/reference_media.cpp is the caller).
Status ffmpeg_decode_audio(VortexAudioDecode& request);
// vortex_ffmpeg_decode_video through the loaded module (src/media/reference_media.cpp is the caller).
Status ffmpeg_decode_video(VortexVideoDecode& request);

}  // namespace vortex
