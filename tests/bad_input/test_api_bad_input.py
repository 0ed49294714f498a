"""Bad input to the Python API (issue 16): each call raises the project's UserError family with what, why
and fix, ends in bounded time, and changes none of the user's files. Interrupting keeps what was done."""

from __future__ import annotations


import numpy as np
import pytest

import trtwidgets as tw
from trtwidgets import demo
from trtwidgets.core.calibration.cache import read_cache, write_cache
from trtwidgets.core.calibration.collect import collect_stats
from trtwidgets.core.calibration.data import CalibrationDataSpec, iter_feeds
from trtwidgets.core.calibration.shape_adapt import adapt_array
from trtwidgets.core.calibration.stats import load_stats, save_stats
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.core.recipe.recipe import Recipe, load_recipe

from .workspace import MODEL, assert_api_refusal, make_bad_inputs, make_user_files

X = demo.sample_inputs(1)[0]["x"]


def _summary():
    return tw.load(MODEL).summary


#: (id, call(ws, bad, user)) — every call must raise a UserError.
CASES = [
    ("load-missing", lambda ws, bad, user: tw.load(ws / "missing.onnx")),
    ("load-folder", lambda ws, bad, user: tw.load(bad / "folder.onnx")),
    ("load-random", lambda ws, bad, user: tw.load(bad / "random.onnx")),
    ("load-unknown-home", lambda ws, bad, user: tw.load("~no_such_user_16/model.onnx")),
    ("lint-flag", lambda ws, bad, user: tw.lint(MODEL, flags="fp16,int4")),
    ("calibrate-zero-shape-spec", lambda ws, bad, user: collect_stats(
        MODEL, CalibrationDataSpec(kind="demo", opt_shapes={"x": [0, 3, 48, 192]}), progress=False)),
    ("calibrate-batch-zero", lambda ws, bad, user: collect_stats(MODEL, "demo", batch_size=0, progress=False)),
    ("calibrate-negative-dim", lambda ws, bad, user: list(iter_feeds([{"x": X}], _summary(),
                                                                     opt_shapes={"x": [1, 3, -48, 192]}))),
    ("calibrate-num-bins", lambda ws, bad, user: collect_stats(MODEL, "demo", num_bins=1000, progress=False)),
    ("calibrate-nan-feed", lambda ws, bad, user: collect_stats(MODEL, [{"x": np.full_like(X, np.nan)}],
                                                               progress=False)),
    ("calibrate-not-a-mapping", lambda ws, bad, user: collect_stats(MODEL, [X], progress=False)),
    ("calibrate-ragged", lambda ws, bad, user: collect_stats(MODEL, [{"x": [[1.0], [1.0, 2.0]]}], progress=False)),
    ("calibrate-not-a-source", lambda ws, bad, user: collect_stats(MODEL, 42, progress=False)),
    ("calibrate-flat-api-folder", lambda ws, bad, user: tw.calibrate(MODEL, str(bad / "data_pickled"),
                                                                     progress=False)),
    ("spec-batch-text", lambda ws, bad, user: CalibrationDataSpec.from_dict({"kind": "demo", "batch_size": "many"})),
    ("spec-preprocess-std", lambda ws, bad, user: CalibrationDataSpec(
        kind="image_dir", path=str(bad / "data_images"), preprocessing={"std": [1, 0, 1]})),
    ("adapt-shrink-by-pad", lambda ws, bad, user: adapt_array(X, [1, 3, 24, 192], "pad", "x")),
    ("stats-damaged", lambda ws, bad, user: load_stats(bad / "damaged_stats.npz")),
    ("stats-resume-other-model", lambda ws, bad, user: collect_stats(
        bad / "nan_model.onnx", [{"x": np.ones((1, 4), np.float32)}], stats=load_stats(user / "stats.npz"),
        progress=False)),
    ("cache-malformed", lambda ws, bad, user: read_cache(bad / "malformed_line.cache")),
    ("cache-write-nan", lambda ws, bad, user: write_cache({"x": float("nan")}, user / "old.cache")),
    ("recipe-not-json", lambda ws, bad, user: load_recipe(bad / "not_json.recipe.json")),
    ("recipe-zero-shape", lambda ws, bad, user: load_recipe(bad / "zero_shape.recipe.json")),
    ("recipe-text", lambda ws, bad, user: Recipe.from_json("[1, 2]")),
    ("inspector-binary", lambda ws, bad, user: parse_inspector_json(bad / "binary.graph.json")),
    ("inspector-bindings", lambda ws, bad, user: parse_inspector_json(bad / "bindings.graph.json")),
    ("inspect-names-only", lambda ws, bad, user: tw.inspect(bad / "names_only.graph.json")),
    ("export-qdq-stats-missing", lambda ws, bad, user: tw.export_qdq(MODEL, ws / "none.npz", user / "old.qdq.onnx")),
]


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_api_ws")
    make_bad_inputs(root / "bad")
    make_user_files(root / "user")
    return root


def test_the_table_is_big_enough():
    assert len(CASES) >= 25 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("call", [pytest.param(c[1], id=c[0]) for c in CASES])
def test_bad_input_to_the_python_api(ws, call):
    assert_api_refusal(call, ws, ws / "user")


class _Interrupted:
    """Yields ``n`` real samples, then raises KeyboardInterrupt, as Ctrl-C in a notebook would."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        yield from demo.sample_inputs(1)[: self.n]
        raise KeyboardInterrupt


def test_an_interrupted_calibration_returns_what_it_finished(tmp_path):
    stats = collect_stats(MODEL, _Interrupted(4), progress=False)
    assert stats.interrupted and stats.samples == 4 and stats.batches == 4
    # What was kept is whole: every tensor counted the same 4 samples, and it saves and continues.
    assert stats.tensors["x"].count == 4 * 3 * 48 * 192
    path = save_stats(stats, tmp_path / "s.npz")
    more = collect_stats(MODEL, demo.sample_inputs(1)[4:6], stats=load_stats(path), progress=False)
    assert more.samples == 6


def test_an_ort_failure_names_the_sample(tmp_path):
    from tests.core.calib_models import conv_relu_model, save

    # The model declares no batch or spatial dims, so a sample of the wrong channel count reaches ONNX Runtime.
    model = conv_relu_model()
    for d in model.graph.input[0].type.tensor_type.shape.dim:
        d.dim_param = "d"
    path = save(model, tmp_path / "conv.onnx")
    good = np.zeros((1, 3, 8, 8), np.float32)
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "a_good.npy", good)
    np.save(data / "b_bad.npy", np.zeros((1, 5, 8, 8), np.float32))
    with pytest.raises(UserError) as info:
        collect_stats(path, str(data), progress=False)
    assert str(data / "b_bad.npy") in info.value.what and info.value.why and info.value.fix
