#!/usr/bin/env python3
"""bench/evidence.py (percentiles, rows) and tools/results_md.py (the generated table) on hand-made inputs.
The expected quantiles are worked out by hand from the definition in docs/evidence.md (position q * (n - 1)
in the sorted samples, linear between the two neighbours), not taken from the code's output."""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "tools"))
import evidence  # noqa: E402
import results_md  # noqa: E402


class Quantile(unittest.TestCase):
    def test_one_to_ten(self):
        s = [7, 3, 10, 1, 5, 9, 2, 8, 6, 4]  # 1..10 shuffled: position q*9
        self.assertAlmostEqual(evidence.quantile(s, 0.10), 1.9)   # 0.9 of the way from 1 to 2
        self.assertAlmostEqual(evidence.quantile(s, 0.50), 5.5)   # halfway between 5 and 6
        self.assertAlmostEqual(evidence.quantile(s, 0.90), 9.1)   # position 8.1
        self.assertAlmostEqual(evidence.quantile(s, 0.95), 9.55)  # position 8.55

    def test_repeated_values(self):
        s = [3, 1, 4, 1, 5]  # sorted 1 1 3 4 5, position q*4
        self.assertAlmostEqual(evidence.quantile(s, 0.10), 1.0)  # position 0.4, between 1 and 1
        self.assertAlmostEqual(evidence.quantile(s, 0.50), 3.0)  # position 2 exactly
        self.assertAlmostEqual(evidence.quantile(s, 0.90), 4.6)  # position 3.6: 4 + 0.6 * (5 - 4)

    def test_small_samples(self):
        self.assertEqual(evidence.quantile([7.25], 0.9), 7.25)
        self.assertAlmostEqual(evidence.quantile([0.0, 10.0], 0.10), 1.0)
        self.assertAlmostEqual(evidence.quantile([10.0, 0.0], 0.90), 9.0)
        self.assertEqual(evidence.quantile([2.0, 4.0], 0.0), 2.0)
        self.assertEqual(evidence.quantile([2.0, 4.0], 1.0), 4.0)

    def test_rejects_empty_and_out_of_range(self):
        with self.assertRaises(ValueError):
            evidence.quantile([], 0.5)
        with self.assertRaises(ValueError):
            evidence.quantile([1.0], 1.5)


class Row(unittest.TestCase):
    def test_fields_and_ratio(self):
        env = {"commit": "abc", "dirty": False, "gpu": "", "sm": "", "driver": "", "cuda": ""}
        r = evidence.row(env, "w", "impl", [4.0, 2.0, 3.0], config="c", baseline="base", baseline_ms_p50=6.0)
        for k in ("schema", "commit", "dirty", "time_utc", "gpu", "sm", "driver", "cuda", "clocks_mhz", "workload",
                  "impl", "config", "n", "ms_p10", "ms_p50", "ms_p90", "ms_p95", "baseline", "baseline_ms_p50", "ratio"):
            self.assertIn(k, r)
        self.assertEqual(r["schema"], "vortex-evidence-1")
        self.assertEqual(r["n"], 3)
        self.assertEqual(r["ms_p50"], 3.0)
        self.assertAlmostEqual(r["ratio"], 0.5)  # 3 ms over a 6 ms baseline

    def test_no_baseline_is_null(self):
        r = evidence.row({"gpu": ""}, "w", "impl", [1.0])
        self.assertIsNone(r["baseline"])
        self.assertIsNone(r["ratio"])


class ResultsTable(unittest.TestCase):
    def test_latest_row_per_workload_and_stable_output(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "benchmarks", "sub"))
            base = {"schema": "vortex-evidence-1", "commit": "c1", "dirty": False, "gpu": "G", "clocks_mhz": {"sm": 1500},
                    "workload": "block x", "impl": "vortex cuda", "config": "a=1", "ms_p10": 1.0, "ms_p50": 2.0,
                    "ms_p90": 3.0, "baseline": None, "baseline_ms_p50": None, "ratio": None}
            old = dict(base, time_utc="2026-01-01T00:00:00Z", ms_p50=9.0)
            new = dict(base, time_utc="2026-01-02T00:00:00Z", commit="c2", baseline="eager", baseline_ms_p50=4.0,
                       ratio=0.5)
            with open(os.path.join(root, "benchmarks", "a.jsonl"), "w") as f:
                f.write(json.dumps(new) + "\n")
            with open(os.path.join(root, "benchmarks", "sub", "b.jsonl"), "w") as f:
                f.write(json.dumps(old) + "\n")
            text = results_md.render(root)
            self.assertEqual(text, results_md.render(root))
            where = os.path.join("benchmarks", "a.jsonl")  # the temporary file above
            self.assertIn("| block x | vortex cuda | a=1 | 2.000 (1.000-3.000) | eager | 4.000 | 0.500 | 1500 | c2 | "
                          f"`{where}:1` |", text)
            self.assertNotIn("9.000", text)

    def test_readme_modes_table_from_block_and_deviation_rows(self):
        # --precision fp8; a switch named at its off value is the same mode
        cfg = next(config for name, config, _ in results_md.MODES if name == "`--precision fp8`")
        block = {"schema": "vortex-evidence-1", "time_utc": "2026-01-01T00:00:00Z", "workload": results_md.BLOCK_WORKLOAD,
                 "impl": "vortex cuda", "config": cfg + ",fp8_gate_epilogue=0", "ms_p10": 10.0, "ms_p50": 11.25, "ms_p90": 12.0,
                 "_where": ("benchmarks/x.jsonl", 1)}
        dev = lambda t, steps, v: {"schema": "vortex-deviation-1", "time_utc": t,  # noqa: E731
                                   "label": f"fp8 (per-tensor W8A8) vs bf16, canonical, {steps}",
                                   "video_latents": {"rel_l2": v}, "audio_latents": {"rel_l2": v},
                                   "_where": ("benchmarks/d.jsonl", 1)}
        rows = [block, dev("2026-01-01T00:00:00Z", "1 step", 9e-3), dev("2026-01-02T00:00:00Z", "1 step", 1.5e-2),
                dev("2026-01-01T00:00:00Z", "12 steps", 8e-3)]
        table = "\n".join(results_md.readme_table(rows))
        self.assertIn("| `--precision fp8` | 11.2 (10.0-12.0) | 1.5e-02 | 8.0e-03 |", table)
        self.assertIn("| `--precision nvfp4` | - | - | - | - |", table)  # no rows: nothing is invented


if __name__ == "__main__":
    unittest.main()
