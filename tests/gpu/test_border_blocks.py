"""Placement rule 12 against real TensorRT 8.6: sibling INT8 convs that all write float do not build.

Python 3.9 with numpy, onnx and tensorrt only. On the GPU machine::

    source /tmp/trtb/env.sh && EXTRA_PYTHONPATH=$PWD $PY39 -m pytest tests/gpu/test_border_blocks.py -v

* every hand-placed block of ``tests/core/qdq_border_blocks.py`` builds, or fails with TensorRT's
  ``chooseHigherPrecision`` assertion, exactly as :func:`~trtwidgets.core.qdq.sibling_layers.float_output_siblings`
  says (a TensorRT that builds a block the rule calls unbuildable fails this test: the rule is then too strict there);
* the toolkit's export of the float sibling block with both readers kept float (what the planner's partial
  candidates write) keeps the siblings float too and builds.

The first run of these blocks (``scripts/gpu_border_blocks.py``, H200) is ``benchmarks/results/peer/borders_run*.json``.
"""

from __future__ import annotations

import onnx
import pytest

from tests.core import qdq_border_blocks as bb
from tests.core.qdq_blocks import simple_amax
from tests.gpu.build_helpers import artifacts_dir, fresh_dir
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.load import load_model
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.sibling_layers import float_output_siblings
from trtwidgets.core.recipe.recipe import Recipe

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")

#: The sibling blocks (the other border blocks built in the first run and stay recorded there).
SIBLINGS = sorted(n for n in bb.BORDER_BLOCKS if n.startswith("siblings"))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return artifacts_dir(tmp_path_factory, "border_blocks")


def _build(work, model: onnx.ModelProto, name: str):
    from trtwidgets.trt.build import build

    path = work / f"{name}.onnx"
    onnx.save(model, str(path))
    # Level 0: the assertion is in the graph optimizer, before any tactic is timed (it failed at levels 0 and 1).
    recipe = Recipe.for_model(load_model(path), flags=("fp16", "int8"), builder_optimization_level=0,
                              timing_cache=str(work / "timing.cache"))
    return build(recipe, out_dir=fresh_dir(work, name), progress=False)


def _text(err: UserError) -> str:
    return err.message + "\n" + "\n".join(str(line) for line in getattr(err, "log_lines", ()))


@pytest.mark.parametrize("name", SIBLINGS)
def test_rule_12_says_what_tensorrt_builds(trt, work, name):
    model = bb.BORDER_BLOCKS[name][0]()
    if float_output_siblings(model):
        with pytest.raises(UserError) as err:
            _build(work, model, name)
        assert "chooseHigherPrecision" in _text(err.value), _text(err.value)
    else:
        _build(work, model, name)


def test_the_export_keeps_the_siblings_float_and_builds(trt, work):
    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    model = bb.float_siblings()
    opts = QdqOptions(high_precision="fp32", trt_version="8.6", exclude=("s0_next", "s1_next"))
    ex = build_qdq(model, QdqSpec(simple_amax(model), opts))
    assert {s.node_label for s in ex.report.skipped if s.rule == 12} == {"s0", "s1"}
    result = _build(work, ex.model, "float_siblings_export")
    by_node = {}
    for layer in parse_inspector_json(result.inspector_json_path).layers:
        for node in layer.onnx_nodes:
            by_node.setdefault(node, set()).add(layer.precision)
    assert "INT8" not in by_node.get("s0", set()) | by_node.get("s1", set()), by_node
    assert "INT8" in by_node.get("c0", set()), by_node
