"""Fuzz the command line's text parsers: --shape, --adapt and --preprocess."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from trtwidgets.cli.calibrate import parse_adapt, parse_preprocess, parse_shapes

from .fuzzing import fuzz_settings, json_mutated, only_user_errors

shape_like = st.from_regex(r"[a-z_:]{0,4}:[0-9x]{0,14}", fullmatch=True)


@fuzz_settings(700)
@given(st.lists(st.one_of(st.text(max_size=24), shape_like), max_size=3))
@example(["x:0x3x48x192"])  # issue 16: accepted, and the batching loop never ended
@example(["x:99999999x99999999x99999999"])  # accepted, then allocated until the machine swapped
@example(["x:1x3", "x:1x3"])
def test_shapes(items):
    result = only_user_errors(parse_shapes, items)
    if isinstance(result, dict):
        assert all(d >= 1 for dims in result.values() for d in dims)


@fuzz_settings(400)
@given(st.lists(st.text(max_size=24), max_size=3))
@example([":pad"])  # an empty input name
def test_adapt(items):
    only_user_errors(parse_adapt, items)


@fuzz_settings(800)
@given(st.one_of(st.text(max_size=80).map(lambda t: "{" + t), st.text(max_size=40),
                 json_mutated({"input": "x", "resize": [48, 192], "layout": "NCHW", "mean": [0.5] * 3,
                               "std": [0.5] * 3}).map(json.dumps)))
@example("[" * 100000)  # was a RecursionError from json.loads
@example("~0")  # found here: Path.expanduser raised RuntimeError for an unknown ~user (every path option did)
def test_preprocess(text):
    result = only_user_errors(parse_preprocess, text)
    assert result is None or isinstance(result, dict) or result.what
