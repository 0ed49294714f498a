"""Readers that used to skip lines silently (issue 16): a damaged line is now an error naming it, or kept."""

from __future__ import annotations

import shutil

from trtwidgets.core.engine.saved_build import load_saved_build

from .workspace import FIXTURES


def test_a_damaged_build_log_line_is_kept_not_dropped(tmp_path):
    build = tmp_path / "build"
    shutil.copytree(FIXTURES / "trt86" / "tiny" / "fp32", build)
    log = build / "build.log.jsonl"
    good = log.read_text().splitlines()
    # A build cut off mid-write leaves half a JSON line at the end: it may be the line that explains the failure.
    log.write_text("\n".join(good + ['{"severity": "ERROR", "message": "Assertion failed: cudnn']) + "\n")
    saved = load_saved_build(build)
    assert len(saved.log) == len([ln for ln in good if ln.strip()]) + 1
    assert saved.log[-1][1].startswith("(not a JSON log line)") and "Assertion failed: cudnn" in saved.log[-1][1]
