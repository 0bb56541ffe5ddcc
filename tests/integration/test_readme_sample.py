"""The README's quick-start output is real and current: the quick start's `ckptprof run` is run again (a smaller
built-in checkpoint, a fresh cache) and the README's sample must have the same format - the same lines, labels and
table headers in the same order - with its numbers, paths and padding masked (issue #34 item 6)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_sample_script() -> ModuleType:
    path = ROOT / "scripts" / "readme_sample.py"
    spec = importlib.util.spec_from_file_location("ckptprof_scripts_readme_sample", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_sample_has_the_format_the_quick_start_prints_now(tmp_path: Path) -> None:
    sample = load_sample_script()
    # GIVEN the README's sample of the quick start
    readme_lines = sample.skeleton(sample.readme_sample((ROOT / "README.md").read_text(encoding="utf-8")))
    # WHEN the quick start's command runs now, as on a fresh machine (a 16 MB checkpoint to keep it short)
    text, session = sample.run_quick_start(tmp_path, tmp_path / "cache", ["--synth-size", "16MB"])
    # THEN it saved its session and printed what the README shows, line for line, numbers aside
    assert session.is_file()
    now = sample.skeleton(text)
    assert readme_lines == now, "the README's sample is out of date: run `python scripts/readme_sample.py`"


def test_skeleton_masks_values_but_not_the_layout() -> None:
    sample = load_sample_script()
    # GIVEN two runs' outputs that differ only in their numbers, paths, padding and findings
    one = (
        "ckptprof: target /a/b (64 shards, 511.87 MB, ext4); tp=1\n\n"
        "rank    wall s    GB/s\n------  --------  ----\n0       0.30      1.68\n"
        "read: parts of the wall\n\nverdict: storage-bound: 1.41 GB/s\n  try: --a\n  try: --b\n"
        "session saved to ckptprof-runs/20261202-155351/session.json\n"
    )
    two = (
        "ckptprof: target /c/d/e (8 shards, 16.1 MB, xfs); tp=1\n\n"
        "rank    wall s    GB/s\n------  --------  ------\n0       10.25     11.2\n"
        "read: parts of the wall\n\nverdict: h2d-bound: 9 GB/s\n  try: --c\n"
        "session saved to ckptprof-runs/20261203-101010-2/session.json\n"
    )
    # THEN their skeletons agree
    assert sample.skeleton(one) == sample.skeleton(two)
    # AND a renamed column, a lost line or a new label does not
    assert sample.skeleton(one.replace("GB/s\n---", "GiB/s\n---")) != sample.skeleton(one)
    assert sample.skeleton(one.replace("read: parts of the wall\n", "")) != sample.skeleton(one)
    assert sample.skeleton(one + "time: 7.0 s in all\n") != sample.skeleton(one)


def test_the_sample_lands_between_the_markers_and_reads_back() -> None:
    sample = load_sample_script()
    readme = f"head\n{sample.BEGIN}\nold\n{sample.END}\ntail\n"
    written = sample.with_sample(readme, "line one\nline two\n")
    assert written.startswith("head\n") and written.endswith("tail\n")
    assert sample.readme_sample(written) == "line one\nline two\n"
