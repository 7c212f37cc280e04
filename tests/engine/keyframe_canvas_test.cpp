// keyframe_canvas (src/engine/conditioning.h): the canvas of a request without width and height, as diffusers'
// MiniMaxH3ResizeStep resolves it (resolve_canvas_size of the keyframe as load_image returns it; values from
// diffusers 0.42.1's resolve_canvas_size): the first keyframe when present, else the last one; EXIF orientation 6
// swaps the axes (exif6.jpg is stored 97x61); a missing file is refused naming it, no keyframe naming the field.
#include <gtest/gtest.h>

#include "engine/conditioning.h"

#ifndef VORTEX_IMAGE_FIXTURES
#error "VORTEX_IMAGE_FIXTURES must name tests/media/fixtures/images"
#endif

namespace vortex {
namespace {

const std::string kImages = VORTEX_IMAGE_FIXTURES;

TEST(KeyframeCanvas, FollowsTheFirstPresentKeyframeAsLoadImageReturnsIt) {
  struct Case {
    std::string first, last;
    int width, height;
  };
  const std::vector<Case> cases = {
      {"rgb.png", "", 1216, 768},            // 97x61
      {"exif6.jpg", "rgb.png", 768, 1216},   // stored 97x61, orientation 6: 61x97
      {"", "tall.png", 736, 1376},           // 70x130, over the area cap
      {"wide.png", "exif6.jpg", 1344, 768},  // 720x405
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.first + " / " + c.last);
    KeyframeFiles files;
    if (!c.first.empty()) files.first = kImages + "/" + c.first;
    if (!c.last.empty()) files.last = kImages + "/" + c.last;
    Result<CanvasSize> canvas = keyframe_canvas(files, "--first-frame");
    ASSERT_TRUE(canvas.ok()) << canvas.status().to_string();
    EXPECT_EQ(canvas->width, c.width);
    EXPECT_EQ(canvas->height, c.height);
  }
}

TEST(KeyframeCanvas, RefusalsNameTheField) {
  KeyframeFiles missing;
  missing.first = kImages + "/no_such.png";
  Result<CanvasSize> r = keyframe_canvas(missing, "--first-frame");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no_such.png"), std::string::npos) << r.status().message();
  Result<CanvasSize> none = keyframe_canvas(KeyframeFiles{}, "conditions");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("conditions"), std::string::npos) << none.status().message();
}

}  // namespace
}  // namespace vortex
