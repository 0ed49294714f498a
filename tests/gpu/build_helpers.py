"""Shared by the GPU build tests: where builds land, fresh build folders, builds that show why they failed.

Python 3.9 with numpy, onnx, tensorrt and pytest only. The ``no_cublas_cudnn`` fixture
(tests/gpu/conftest.py) goes with these: cuBLAS/cuDNN are load-time stubs on the GPU machine.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.gpu import models
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.load import load_model
from trtwidgets.core.recipe.recipe import Recipe

#: TensorRT tactic sources that are load-time stubs on the GPU machine (DEVELOPERS.md, "The GPU machine").
STUBBED_TACTIC_SOURCES = ("CUBLAS", "CUBLAS_LT", "CUDNN")


def artifacts_dir(tmp_path_factory, name: str) -> Path:
    """``$TRTWIDGETS_ARTIFACTS/<name>`` when that is set (kept for the lead), else a pytest tmp dir; created."""
    root = os.environ.get("TRTWIDGETS_ARTIFACTS")
    base = Path(root) / name if root else tmp_path_factory.mktemp(name)
    base.mkdir(parents=True, exist_ok=True)
    return base


def fresh_dir(work: Path, name: str) -> Path:
    """A build folder that does not exist yet (runs may repeat in one artifacts dir)."""
    k, p = 0, work / name
    while p.exists():
        k += 1
        p = work / f"{name}-{k}"
    return p


def model_recipe(work: Path, model, **kw) -> Recipe:
    """The recipe of an onnx.helper ``model``, saved under ``work/models``; builds share ``work/timing.cache``."""
    kw.setdefault("timing_cache", str(work / "timing.cache"))
    return Recipe.for_model(load_model(models.save(model, work / "models" / f"{model.graph.name}.onnx")), **kw)


def build_or_explain(recipe, out_dir, *, verbose: bool = True, **kw):
    """``trtwidgets.trt.build.build`` into ``out_dir``; a failure prints its message and log before re-raising.

    ``verbose`` shows the build's progress and prints its summary.
    """
    from trtwidgets.trt.build import build

    try:
        result = build(recipe, out_dir=out_dir, progress=verbose, **kw)
    except UserError as err:
        print("BUILD FAILED:\n" + err.message, file=sys.stderr)
        for line in getattr(err, "log", ()):
            print(line.format(), file=sys.stderr)
        raise
    if verbose:
        print(result.summary())
    return result


def tactic_sources_mask(trt) -> int:
    """The tactic-source bit mask of every source this TensorRT has except :data:`STUBBED_TACTIC_SOURCES`."""
    mask = 0
    for name, member in trt.TacticSource.__members__.items():
        if name not in STUBBED_TACTIC_SOURCES:
            mask |= 1 << int(member)
    return mask
