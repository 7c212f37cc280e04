// Shared decoder flags (see decoder_options.h).
#include "decoder_options.h"

namespace vortex::cli {

void add_decoder_options(CLI::App* sub, DecoderArgs& a, bool frames_dir) {
  sub->add_option("--vae", a.vae,
                  "Video VAE folder, diffusers (the snapshot's vae/) or original (FL2VA/video_vae) layout: "
                  "also decode to video.mp4")
      ->type_name("DIR");
  sub->add_option("--audio-vae", a.audio_vae,
                  "Audio VAE folder, diffusers (audio_vae/) or original (FL2VA/audio_vae) layout: also audio.wav")
      ->type_name("DIR");
  sub->add_option("--synthetic-vae", a.synthetic_vae, "tiny | full: deterministic synthetic decoders (media is noise)")
      ->type_name("NAME");
  sub->add_option("--vae-seed", a.seed, "Seed of the synthetic decoders (default 0)")->type_name("INT");
  sub->add_flag("--no-tiling", a.no_tiling, "Decode whole frames (not the released tiling; changes the pixels)");
  sub->add_option("--crf", a.crf, "x264 constant rate factor of video.mp4 (default 18)")->type_name("INT");
  if (frames_dir)
    sub->add_option("--frames-dir", a.frames_dir, "Also write every decoded frame as 8-bit RGB PNG here")
        ->type_name("DIR");
}

Status apply_decoder_args(const DecoderArgs& a, PipelineOptions& o) {
  o.vae_dir = a.vae;
  o.audio_vae_dir = a.audio_vae;
  o.synthetic_vae = SyntheticVae::kNone;
  if (!a.synthetic_vae.empty()) {
    VORTEX_ASSIGN_OR_RETURN(o.synthetic_vae, parse_synthetic_vae(a.synthetic_vae));
  }
  o.synthetic_vae_seed = a.seed;
  o.vae_tiling = !a.no_tiling;
  o.mp4_crf = a.crf;
  return Status::Ok();
}

}  // namespace vortex::cli
