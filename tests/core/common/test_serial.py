"""One serialization: dataclasses to strict JSON and back by their annotations (core/common/serial.py)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest

from trtwidgets.core.accuracy.metrics import compare_tensor
from trtwidgets.core.common.serial import fields_json, from_json, json_float, read_float, to_json
from trtwidgets.core.engine.latency import BenchResult
from trtwidgets.core.plan.measured.paired import PairedRounds


@dataclass(frozen=True)
class Inner:
    name: str
    scale: float = 1.0


@dataclass(frozen=True)
class Outer:
    count: int
    inner: Inner
    shape: Tuple[int, ...] = ()
    pair: Tuple[str, float] = ("a", 0.0)
    by_k: Dict[int, float] = field(default_factory=dict)
    names: List[str] = field(default_factory=list)
    note: Optional[str] = None
    flag: bool = False


def test_a_dataclass_goes_to_strict_json_and_comes_back_equal():
    o = Outer(np.int64(3), Inner("x", float("nan")), (1, 2), ("b", float("inf")), {1: 0.5, 5: -math.inf},
              ["p", "q"], None, True)
    text = json.dumps(to_json(o), allow_nan=False)  # strict JSON: no NaN literal
    back = from_json(Outer, json.loads(text))
    assert back.count == 3 and isinstance(back.count, int) and math.isnan(back.inner.scale)
    assert back.shape == (1, 2) and back.pair == ("b", math.inf) and back.by_k == {1: 0.5, 5: -math.inf}
    assert back.names == ["p", "q"] and back.note is None and back.flag is True
    assert list(to_json(o)) == ["count", "inner", "shape", "pair", "by_k", "names", "note", "flag"]  # field order


def test_missing_fields_take_their_defaults_and_unknown_keys_are_ignored():
    back = from_json(Outer, {"count": 1, "inner": {"name": "y"}, "added_later": [1, 2]})
    assert back == Outer(1, Inner("y"))


@pytest.mark.parametrize("data, said", [
    ({"inner": {"name": "y"}}, "Outer: the field 'count' is missing"),
    ({"count": "3", "inner": {"name": "y"}}, "Outer.count: expected an integer"),
    ({"count": 1.5, "inner": {"name": "y"}}, "Outer.count: expected an integer"),
    ({"count": 1, "inner": {"name": 7}}, "Outer.inner.name: expected a string"),
    ({"count": 1, "inner": {"name": "y"}, "shape": [1, "x"]}, r"Outer.shape\[1\]: expected an integer"),
    ({"count": 1, "inner": {"name": "y"}, "by_k": {"one": 1.0}}, "the key 'one' is not an integer"),
    ({"count": 1, "inner": {"name": "y"}, "flag": "yes"}, "Outer.flag: expected true or false"),
    ({"count": 1, "inner": "y"}, "Outer.inner: expected an object"),
])
def test_a_value_of_the_wrong_kind_names_its_field(data, said):
    with pytest.raises(ValueError, match=said):
        from_json(Outer, data)


def test_floats_read_back_from_what_older_files_wrote():
    assert [json_float(v) for v in (1.5, math.nan, math.inf, -math.inf)] == [1.5, "nan", "inf", "-inf"]
    assert math.isnan(read_float(None)) and read_float("-inf") == -math.inf and read_float(2) == 2.0


def test_the_converted_artifacts_keep_their_files():
    m = compare_tensor(np.arange(12.0).reshape(3, 4), np.arange(12.0).reshape(3, 4) + 0.1)
    assert type(m).from_dict(json.loads(json.dumps(m.to_dict()))) == m
    b = BenchResult({"x": (1, 3)}, 1, 10, 2, 1.0, 1.1, 1.2, 1.05, 0.9, 1.3, 0.1, 1000.0, extra={"h2d": 0.2})
    assert BenchResult.from_dict(json.loads(json.dumps(b.to_dict()))) == b
    assert b.to_dict()["shapes"] == {"x": [1, 3]} and fields_json(b) == b.to_dict()
    p = PairedRounds(8, 1, 10 / 512)
    assert p.to_dict()["alpha"] == 0.05 and PairedRounds.from_dict(p.to_dict()) == p
    assert math.isnan(PairedRounds.from_dict({"won": 0, "lost": 0, "p": None}).p)  # as older plan.json wrote it
