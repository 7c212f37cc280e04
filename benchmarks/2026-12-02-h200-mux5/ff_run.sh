#!/usr/bin/env bash
# Unpacks FFmpeg's libraries (Debian bookworm's libav*.so.59 and their dependencies) into .carry/ffx, an ignored
# folder that stays on the warm machine for the next call, and lists what the dynamic linker still lacks.
set -u
root=$(pwd); mkdir -p "$root/.carry/ffx"
tar -xJf "$root/.carry/ff/ffmpeg-libs.tar.xz" -C "$root/.carry/ffx" || { echo "untar failed"; exit 1; }
ls "$root/.carry/ffx/ffc" | wc -l
for f in "$root"/.carry/ffx/ffc/libav*.so.*; do LD_LIBRARY_PATH="$root/.carry/ffx/ffc" ldd "$f" | grep "not found"; done | sort -u
echo "ffx ready: $(du -sh "$root/.carry/ffx" | cut -f1)"
