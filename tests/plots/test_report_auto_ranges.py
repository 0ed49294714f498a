"""Reports of an ``auto`` calibration show each tensor's chosen method (issue 34): its SQNR, its clipped share."""

from __future__ import annotations

import re

import pytest

import trtwidgets as tw
from trtwidgets import demo
from trtwidgets.plots.report_sections import calibration_sections


@pytest.fixture(scope="module")
def cal():
    return tw.calibrate(tw.load(demo.MODEL_PATH), "demo", progress=False, max_samples=2)


def _sqnr_cells(body: str) -> int:
    return len(re.findall(r"<td>-?[0-9.]+</td><td>[0-9.]+%</td>", body))


def test_the_ranges_table_reads_each_tensors_chosen_method(cal):
    assert cal.method == "auto" and cal.choices
    chosen = {n: c.method for n, c in cal.choices.items()}
    with_choices = calibration_sections(cal.stats, cal.ranges, cal.method, chosen=chosen)[0].body
    without = calibration_sections(cal.stats, cal.ranges, cal.method)[0].body
    assert "(auto: each tensor" in with_choices and "(auto: each tensor" not in without
    # Every tensor auto chose has its SQNR and clipped share; without the choices "auto" names no range.
    assert _sqnr_cells(with_choices) >= min(len(chosen), 400) and _sqnr_cells(without) == 0
