// libvortex.so's own translation unit: the library is the components' objects (src/CMakeLists.txt links
// them whole); this file only gives the target a source and names the library's build.
#include "vortex/build_info.h"

namespace vortex {
extern const char* const kLibraryVersion = VORTEX_VERSION_STRING;
}  // namespace vortex
