#!/usr/bin/env python3
"""Vision fixtures for a ref2va presentation with one video and one image, for tests/vision/ref2va_vision_test.cpp:
diffusers 0.42.1's frame sampling (MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames), transformers 5.x's
Qwen3VLVideoProcessor (pixel_values_videos: two different frames per temporal patch) and Qwen2VLImageProcessor, the
vision tower's video features, get_rope_index, and every hidden_states[k] of Qwen3VLModel, on the tiny Qwen3-VL the
text encoder tests ship (tests/text_encoder/fixtures/model: BF16, a one-block vision tower with a DeepStack tap).

transformers, diffusers and torch are oracles for these fixtures only; Vortex never imports them and CI never runs
this script (it checks the committed file). Run it where they are installed:

    python3 tests/vision/make_ref2va_vision_fixtures.py [--model tests/text_encoder/fixtures/model]
                                                        [--out tests/vision/fixtures]

What it writes, ref2va_vision.safetensors:
  video.frames          u8 [S, H, W, 3]: the sampled frames of a FRAMES-frame 24 fps video (only these are stored)
  video.indices         i64 [S]: the 24 fps frame each sampled frame is
  video.timestamps      f64 [S / 2 rounded up]: the block timestamps
  video.pixel_values    f32 [T * gh * gw, 3 * 2 * 8 * 8]: the video processor's pixel_values_videos
  video.merged          f32 the FP32 tower's video features (pooler_output), merged64 the FP64 tower's (the floor)
  video.deepstack.0     f32 the FP32 tower's DeepStack feature, deepstack64.0 the FP64 tower's
  video.merged_bf16     f32 the BF16 tower's video features (values of BF16), video.deepstack_bf16.0 its DeepStack
  image.image           u8 [H, W, 3]; image.pixel_values f32 the image processor's pixel_values
  ids                   i32 [L]: "<Video 1>: " as random text ids, per block random "<t seconds>" ids, <|vision_start|>
                        (502), <|video_pad|> (501) per vision token, <|vision_end|> (503); then "<Picture 1>: " ids and
                        an image block of <|image_pad|> (500); then prompt ids (all text ids below 500)
  positions             i64 [3, L]: get_rope_index
  bf16.<k>              bf16 [L, 128] hidden_states[k] of the BF16 model (vision tower in BF16 too), k = 0..4
  metadata: floor_<k> = rel-L2 of hidden_states[k] against the same weights in FP32, the grids, the versions.
"""
import argparse
import copy
import os

import numpy as np
import torch
from safetensors.torch import save_file

import diffusers
import transformers
from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VATextEncoderStep
from transformers import Qwen3VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

IMAGE_PAD, VIDEO_PAD, START, END = 500, 501, 502, 503
FRAMES, HEIGHT, WIDTH = 49, 32, 48  # 49 frames at 24 fps: 5 sampled at 2 fps, 3 pairs (the last frame repeated)
IMAGE_H, IMAGE_W = 48, 32
# The release's video_preprocessor_config.json / preprocessor_config.json with the tiny model's patch size.
VIDEO_PROCESSOR = dict(size={"longest_edge": 25165824, "shortest_edge": 4096}, patch_size=8, temporal_patch_size=2,
                       merge_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3, cap_pixels_per_frame=False)
IMAGE_PROCESSOR = dict(size={"longest_edge": 16777216, "shortest_edge": 64}, patch_size=8, temporal_patch_size=2,
                       merge_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3)


def rel_l2(got, want):
    return float(torch.linalg.vector_norm(got.double() - want.double()) / torch.linalg.vector_norm(want.double()))


def main():
    parser = argparse.ArgumentParser()
    here = os.path.dirname(__file__)
    parser.add_argument("--model", default=os.path.join(here, "..", "text_encoder", "fixtures", "model"))
    parser.add_argument("--out", default=os.path.join(here, "fixtures"))
    args = parser.parse_args()
    bf16 = Qwen3VLForConditionalGeneration.from_pretrained(args.model, dtype=torch.bfloat16).eval()
    f32 = Qwen3VLForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32).eval()
    f64_visual = copy.deepcopy(f32.model.visual).double()
    rng = np.random.default_rng(29)
    gen = torch.Generator().manual_seed(29)

    video = rng.integers(0, 256, (FRAMES, HEIGHT, WIDTH, 3), dtype=np.uint8)
    video[:, :, :, 0] = np.arange(FRAMES, dtype=np.uint8)[:, None, None]  # each frame says which it is
    sampled, stamps = MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames(video, 24, 2.0, 2)
    indices = [int(frame[0, 0, 0]) for frame in sampled]
    video_inputs = Qwen3VLVideoProcessor(**VIDEO_PROCESSOR)(videos=[np.stack(sampled)], do_sample_frames=False,
                                                           return_tensors="pt")
    vgrid = video_inputs["video_grid_thw"]
    image = rng.integers(0, 256, (IMAGE_H, IMAGE_W, 3), dtype=np.uint8)
    image_inputs = Qwen2VLImageProcessor(**IMAGE_PROCESSOR)(images=[image], return_tensors="pt")
    igrid = image_inputs["image_grid_thw"]

    def text(n):
        return torch.randint(0, 500, (n,), generator=gen).tolist()

    ids = text(6)  # "<Video 1>: "
    per_block = int(vgrid[0][1] * vgrid[0][2]) // 4
    for _ in range(int(vgrid[0][0])):
        ids += text(5) + [START] + [VIDEO_PAD] * per_block + [END]  # "<t seconds>" and the block
    ids += text(5) + [START] + [IMAGE_PAD] * (int(igrid[0].prod()) // 4) + [END]  # "<Picture 1>: " and the block
    ids += text(19)
    input_ids = torch.tensor([ids])
    mm = torch.zeros_like(input_ids)
    mm[input_ids == IMAGE_PAD] = 1
    mm[input_ids == VIDEO_PAD] = 2
    positions, _ = f32.model.get_rope_index(input_ids, mm, image_grid_thw=igrid, video_grid_thw=vgrid)

    tensors = {"video.frames": torch.from_numpy(np.stack(sampled)).contiguous(),
               "video.indices": torch.tensor(indices, dtype=torch.int64),
               "video.timestamps": torch.tensor(stamps, dtype=torch.float64),
               "video.pixel_values": video_inputs["pixel_values_videos"].float().contiguous(),
               "image.image": torch.from_numpy(image), "image.pixel_values": image_inputs["pixel_values"].float(),
               "ids": torch.tensor(ids, dtype=torch.int32), "positions": positions[:, 0].to(torch.int64).contiguous()}
    with torch.no_grad():
        o = f32.model.visual(video_inputs["pixel_values_videos"], grid_thw=vgrid)
        o64 = f64_visual(video_inputs["pixel_values_videos"].double(), grid_thw=vgrid)
    tensors["video.merged"] = o.pooler_output.float().contiguous()
    tensors["video.merged64"] = o64.pooler_output.double().contiguous()
    for k, feature in enumerate(o.deepstack_features):
        tensors["video.deepstack.%d" % k] = feature.float().contiguous()
        tensors["video.deepstack64.%d" % k] = o64.deepstack_features[k].double().contiguous()
    with torch.no_grad():  # the BF16 tower, the program a Backend runs
        ob = bf16.model.visual(video_inputs["pixel_values_videos"].to(torch.bfloat16), grid_thw=vgrid)
    tensors["video.merged_bf16"] = ob.pooler_output.float().contiguous()
    for k, feature in enumerate(ob.deepstack_features):
        tensors["video.deepstack_bf16.%d" % k] = feature.float().contiguous()

    meta = {"transformers": transformers.__version__, "diffusers": diffusers.__version__, "torch": torch.__version__,
            "frames": repr(FRAMES), "video_grid_thw": repr(vgrid.tolist()), "image_grid_thw": repr(igrid.tolist())}
    states = {}
    for tag, model, dtype in (("bf16", bf16, torch.bfloat16), ("f32", f32, torch.float32)):
        with torch.no_grad():
            out = model.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), mm_token_type_ids=mm,
                              pixel_values=image_inputs["pixel_values"].to(dtype), image_grid_thw=igrid,
                              pixel_values_videos=video_inputs["pixel_values_videos"].to(dtype), video_grid_thw=vgrid,
                              use_cache=False, output_hidden_states=True)
        states[tag] = [h[0].float() for h in out.hidden_states]
    for k, (h, h32) in enumerate(zip(states["bf16"], states["f32"])):
        tensors["bf16.%d" % k] = h.to(torch.bfloat16).contiguous()
        meta["floor_%d" % k] = repr(rel_l2(h, h32))
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(args.out, "ref2va_vision.safetensors"),
              metadata=meta)
    print(meta, indices, stamps)


if __name__ == "__main__":
    main()
