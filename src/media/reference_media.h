// ref2va references in: the checks and normalizations of diffusers 0.42.1's MiniMaxH3Ref2VASetupStep
// (modular_pipelines/minimax_h3/before_encoder.py) and references.py. A reference file is probed from its header
// (probe_image for images, FFmpeg's demuxer for videos and audio) and the set is checked against the official
// README's limits before any weights load. Videos go onto 24 fps by whole-frame drops and repeats; soundtracks are
// truncated at their own rate, upmixed to stereo and resampled with torchaudio's Resample (sinc_interp_hann).
// Tested in tests/media/reference_media_test.cpp against diffusers and torchaudio (make_reference_fixtures.py).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/reference_kind.h"
#include "media/image_reader.h"
#include "media/keyframe_canvas.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// The released checkpoint's limits (the MiniMax-H3 README, H3-Base-Ref2VA; diffusers' setup step holds the
// counts), and Vortex's own bounds on a file before anything is decoded.
struct ReferenceLimits {
  int max_images = 9, max_videos = 3, max_audios = 3, max_references = 12;
  double min_clip_seconds = 2.0, max_clip_seconds = 15.0;  // each video, and each audio clip
  double max_total_video_seconds = 15.0, max_total_audio_seconds = 15.0;
  int64_t max_media_file_bytes = int64_t{1} << 30;  // a video or an audio file: 1 GiB
  int max_video_side = 8192;                        // width and height of a video reference
};

// What a reference file's header says (nothing decoded).
struct ReferenceProbe {
  std::string path;
  ReferenceKind kind = ReferenceKind::kImage;
  int width = 0, height = 0;  // image (after EXIF orientation) or video
  double fps = 0.0;           // video: the stream's average rate
  double duration_s = 0.0;    // video: its stream; audio: the audio stream
  bool has_audio = false;     // a video with a soundtrack, or an audio clip
  int sample_rate = 0, channels = 0;
};

// "image:", "video:" or "audio:" in front of a path names the kind; otherwise it comes from the file (an image
// signature, a video stream, an audio stream). `kind_given` tells which.
struct ReferenceSpec {
  std::string path;
  ReferenceKind kind = ReferenceKind::kImage;
  bool kind_given = false;
};
Result<ReferenceSpec> parse_reference_spec(const std::string& arg);

// Probes one reference file: an image through probe_image; a video or audio file through FFmpeg's demuxer (no
// decode). Refuses, naming the file: a missing or oversized file, no stream of the kind asked for, a video without
// a frame rate, a video side over limits.max_video_side, a clip shorter or longer than the per-clip limits, more
// than 2 audio channels.
Result<ReferenceProbe> probe_reference(const ReferenceSpec& spec, const ReferenceLimits& limits = {});

// The set in packed order: at least one reference, the count limits (per kind and in total), audio never alone,
// the total video and audio durations (a video's soundtrack counts with its video).
Status check_reference_set(const std::vector<ReferenceProbe>& refs, const ReferenceLimits& limits = {});

// _normalize_video_condition's frame-rate pass: the indices of the decoded frames that make the 24 fps stream,
// each held until the 24 fps slot of the next (slot_i = floor(i * 24 / fps + 0.5) in FP64, the last frame up to
// floor(n * 24 / fps + 0.5)), truncated to num_frames. fps == 24 keeps every frame.
Result<std::vector<int64_t>> reference_frame_indices(int64_t decoded_frames, double fps, int num_frames,
                                                     double target_fps = 24.0);

// The frame count MiniMaxH3Ref2VAReferenceEncoderStep encodes: snapped down to 17n + 5 (n >= 1).
int reference_vae_frames(int frames);

// The canvas a video reference is put on: resolve_canvas_size of its own aspect ratio (the target's rule).
Result<CanvasSize> reference_video_canvas(int width, int height, const CanvasRule& rule = {});

// The size an image reference is encoded at: scaled to a 2048-pixel short edge (upscaling included, no area cap),
// each axis rounded half to even to a multiple of 32 (at least 32). Aspect ratios outside 1:4 .. 4:1 are refused.
Result<CanvasSize> reference_image_size(int width, int height, int short_edge = 2048, int multiple = 32);

// torchaudio.transforms.Resample(orig, new) with its defaults (sinc_interp_hann, lowpass_filter_width 6, rolloff
// 0.99): the rates reduced by their gcd, a kernel per output phase built in FP64 and stored as FP32, the input
// zero-padded by `width` on the left and width + orig on the right, a strided convolution, ceil(new * n / orig)
// samples kept. Vortex accumulates each output sample in FP64 (torch's conv1d in FP32).
class SincResampler {
 public:
  static Result<SincResampler> create(int orig_rate, int new_rate);
  int orig() const { return orig_; }  // after the gcd
  int target() const { return new_; }
  int width() const { return width_; }
  const std::vector<float>& kernel() const { return kernel_; }  // [new, 2 * width + orig]
  std::vector<float> resample(const float* x, int64_t n) const;

 private:
  int orig_ = 1, new_ = 1, width_ = 0;
  std::vector<float> kernel_;
};

// An audio file's or a video's soundtrack, decoded as diffusers' references.py decodes it with PyAV (the first audio
// stream, converted to planar float at its own rate and channel count): [C, N] f32 and the rate. A stream longer
// than max_seconds is refused while decoding.
struct DecodedAudio {
  Tensor waveform;  // [C, N] f32
  int sample_rate = 0;
};
Result<DecodedAudio> read_reference_audio(const std::string& path, double max_seconds = 16.0);

// _normalize_audio_condition: waveform [C, N] f32 (C = 1 or 2) at sample_rate -> [2, M] f32 at target_rate:
// truncated to int(num_frames / fps * sample_rate) samples at its own rate, a mono channel repeated, then resampled
// when the rates differ.
Result<Tensor> normalize_reference_audio(const Tensor& waveform, int sample_rate, int target_rate, int num_frames,
                                         double fps = 24.0);

// A video reference's frames as references.py's _decode_video_file decodes them with PyAV: the first video stream,
// each frame converted by swscale to rgb24 (frame.to_ndarray(format="rgb24")), then turned upright by the display
// matrix's rotation snapped to quarter turns (round(rotation / 90) % 4 clockwise quarter turns, np.rot90(k=-turns)).
// `keep(i)` is asked for each decoded frame i (true: kept); `stop(i)` ends the decode before frame i is converted
// (the frames after the last one a request needs). Frames of more than max_pixels are refused.
struct DecodedVideo {
  std::vector<RgbImage> frames;  // the kept frames, upright
  std::vector<int64_t> indices;  // their indices in the decoded stream
  int64_t decoded = 0;           // frames decoded (the stream's count when nothing stopped it)
  double fps = 0.0;              // the stream's average rate (else its guessed rate)
  int quarter_turns = 0;         // clockwise quarter turns applied (0..3)
  std::string pixel_format;      // the decoder's
};
struct VideoDecodeFilter {
  std::function<bool(int64_t)> keep;  // null: every frame
  std::function<bool(int64_t)> stop;  // null: never
  // Applied to each kept frame after rotation (e.g. the resize onto the canvas); null: none.
  std::function<RgbImage(RgbImage&&)> transform;
};
Result<DecodedVideo> read_reference_video_frames(const std::string& path, const VideoDecodeFilter& filter = {},
                                                 int64_t max_pixels = int64_t{8192} * 8192);

// np.rot90(frame, k=-turns): `turns` clockwise quarter turns (any integer, taken mod 4).
RgbImage rotate_quarter_turns(const RgbImage& src, int turns);

// A video reference as MiniMaxH3Ref2VASetupStep._normalize_video_condition leaves it: the decoded frames on MiniMax
// H3's 24 fps grid (reference_frame_indices), truncated to num_frames, on the canvas of the video's own aspect ratio
// (reference_video_canvas), each resized with Pillow's LANCZOS when its size differs. Only the frames the 24 fps
// grid reaches are decoded: the decode stops at the first frame whose slot is num_frames or later.
struct ReferenceVideo {
  std::vector<RgbImage> frames;  // [num_frames at most] on `canvas`, 24 fps
  CanvasSize canvas;
  double source_fps = 0.0;
  int64_t source_frames = 0;  // decoded frames
  int quarter_turns = 0;
};
Result<ReferenceVideo> read_reference_video(const std::string& path, int num_frames, const CanvasRule& rule = {},
                                            double target_fps = 24.0);

}  // namespace vortex
