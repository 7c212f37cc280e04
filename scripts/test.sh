#!/usr/bin/env bash
# Bootstrap, build, and run every test with CTest. GPU tests (label gpu) skip with a visible reason on
# machines without a CUDA device; the summary at the end lists every skipped test and why.
# Exit code: CTest's. Parallelism: TEST_JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh
status=0
ctest --test-dir build --output-on-failure -j "${TEST_JOBS:-2}" --output-junit ctest-junit.xml 2>&1 \
  | tee build/ctest.log || status=$?
echo
# The serve soak's figures (jobs, cancels, RSS, answers by kind) from its output, passing or not.
sed -n '/==== soak figures/,/EightClientsMixingEverything/p' build/Testing/Temporary/LastTest.log 2>/dev/null | \
  grep -v "EightClientsMixingEverything" || true
echo
echo "==== test summary ===="
grep -E "tests passed|tests failed" build/ctest.log || true
python3 - build/ctest-junit.xml <<'PY' || true
import sys
import xml.etree.ElementTree as ET
skipped = []
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if tc.find("skipped") is None:
        continue
    out = tc.find("system-out")
    lines = (out.text or "").splitlines() if out is not None else []
    reason = next((lines[i + 1] for i, l in enumerate(lines[:-1]) if l.endswith(": Skipped")), "(no reason printed)")
    skipped.append((tc.get("name"), reason))
print(f"skipped: {len(skipped)}" + (" (GPU tests skip when no CUDA device is present)" if skipped else ""))
for name, reason in skipped:
    print(f"  {name}: {reason}")
PY
exit "$status"
