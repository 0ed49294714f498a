"""A user's workspace for the bad-input tables: the files a user already has, and a shelf of bad inputs.

The user's files (statistics, a recipe, an earlier cache, Q/DQ model, report and build folder) are what
bad input must never cost: each table test fingerprints them before and after the call.
"""

from __future__ import annotations

import hashlib
import json
import pickle  # only to WRITE a pickled .npy that the toolkit must refuse to read
import shutil
from pathlib import Path
from typing import Dict

import numpy as np

from trtwidgets import demo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MODEL = demo.MODEL_PATH


def fingerprint(folder: Path) -> Dict[str, str]:
    """Relative path -> SHA-256 of every file under ``folder`` (and the folders themselves, as '')."""
    out = {}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
    return out


def make_user_files(user: Path) -> None:
    """What a user has after an earlier, successful session."""
    user.mkdir(parents=True)
    shutil.copy(FIXTURES / "calib" / "cls_demo_stats.npz", user / "stats.npz")
    shutil.copy(FIXTURES / "trt86" / "cls_static_int8_entropy2" / "recipe.json", user / "recipe.json")
    shutil.copy(FIXTURES / "trt86" / "cls_entropy2.cache", user / "old.cache")
    shutil.copy(FIXTURES / "qdq" / "cls_qdq_int8.onnx", user / "old.qdq.onnx")
    (user / "report.html").write_text("<html>the earlier report</html>")
    (user / "layers.csv").write_text("name,precision\nconv,INT8\n")
    shutil.copytree(FIXTURES / "trt86" / "tiny" / "fp32", user / "build")


def make_bad_inputs(bad: Path) -> None:
    """One file or folder per kind of bad input (names say what is wrong)."""
    bad.mkdir(parents=True)
    x = demo.sample_inputs(1)[0]["x"]
    good_onnx = MODEL.read_bytes()
    (bad / "empty.onnx").write_bytes(b"")
    (bad / "random.onnx").write_bytes(np.random.default_rng(0).bytes(4096))
    (bad / "truncated.onnx").write_bytes(good_onnx[: len(good_onnx) // 3])
    (bad / "text.onnx").write_text("this is not a model\n")
    (bad / "folder.onnx").mkdir()
    for name, arrays in {
        "pickled": None, "float64": x.astype(np.float64), "rank3": x[0], "nan": np.full_like(x, np.nan),
        "inf": np.where(np.arange(x.size).reshape(x.shape) % 7 == 0, np.inf, x).astype(np.float32),
        "empty_batch": x[:0], "wrong_size": x[:, :, :, :7], "int_data": (x * 100).astype(np.int32),
    }.items():
        d = bad / f"data_{name}"
        d.mkdir()
        if arrays is None:
            # A .npy holding a Python object: reading it would run pickle; it must be refused unread.
            np.save(d / "evil.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
        else:
            np.save(d / "s.npy", arrays)
    # A model that makes NaN inside (Sqrt of negative values) on data that is itself fine.
    from tests.core.calib_models import nan_model, save

    save(nan_model(), bad / "nan_model.onnx")
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import Recipe, save_recipe

    # In a folder of its own: `run` inspects any *.graph.json beside a recipe, and the broken ones below would be met
    # (rightly, before calibration) instead of the NaN this recipe is for.
    (bad / "nan_run").mkdir()
    save_recipe(Recipe.for_model(load_model(bad / "nan_model.onnx")), bad / "nan_run" / "nan_model.recipe.json")
    d = bad / "data_negative"
    d.mkdir()
    np.save(d / "s.npy", np.full((2, 4), -1.0, np.float32))
    d = bad / "data_corrupt_npy"
    d.mkdir()
    (d / "s.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    d = bad / "data_wrong_name_npz"
    d.mkdir()
    np.savez(d / "s.npz", images=x, other=x)
    d = bad / "data_corrupt_npz"
    d.mkdir()
    (d / "s.npz").write_bytes(b"PK\x03\x04" + b"\x00" * 64)
    d = bad / "data_text_only"
    d.mkdir()
    (d / "notes.txt").write_text("no samples here")
    (bad / "data_empty").mkdir()
    d = bad / "data_images"
    d.mkdir()
    from PIL import Image

    Image.fromarray(demo.sample_images()[0]).save(d / "crop.png")
    d = bad / "data_bad_image"
    d.mkdir()
    (d / "crop.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    (bad / "pre_binary.json").write_bytes(b"\xff\xfe\x00\x01")
    # Calibration caches.
    (bad / "malformed_line.cache").write_text("TRT-8600-EntropyCalibration2\nx: 3c01f09e\nfoo: zzzz\n")
    (bad / "header_only.cache").write_text("TRT-8600-EntropyCalibration2\n")
    (bad / "no_header.cache").write_text("x: 3c01f09e\n")
    (bad / "nan_scale.cache").write_text("TRT-8600-EntropyCalibration2\nx: 7fc00000\n")
    (bad / "binary.cache").write_bytes(b"\x00\xff\xfe" * 10)
    # Statistics.
    (bad / "random_stats.npz").write_bytes(np.random.default_rng(1).bytes(512))
    np.savez(bad / "other_npz.npz", a=np.zeros(3))
    with np.load(FIXTURES / "calib" / "cls_demo_stats.npz") as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    samples = meta["samples"]
    meta["samples"] = None
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(bad / "damaged_stats.npz", **arrays)
    # Statistics with a "calibration" member that is no calibration (issue 45: --resume passed over it in silence).
    arrays["meta"] = np.frombuffer(json.dumps(dict(meta, samples=samples)).encode(), np.uint8)
    np.savez(bad / "objects_calibration.npz", **arrays, calibration=np.array([{"method": "max"}], dtype=object))
    np.savez(bad / "text_calibration.npz", **arrays, calibration=np.frombuffer(b"{'method': 'max'}", np.uint8))
    # Inspector JSON.
    (bad / "binary.graph.json").write_bytes(pickle.dumps({"Layers": []}))
    shutil.copy(FIXTURES / "trt86" / "tiny" / "names_only" / "engine.graph.json", bad / "names_only.graph.json")
    (bad / "truncated.graph.json").write_text(
        (FIXTURES / "trt86" / "tiny" / "fp32" / "engine.graph.json").read_text()[:500])
    (bad / "bindings.graph.json").write_text(json.dumps({"Layers": [{"Name": "a"}], "Bindings": True}))
    # Recipes.
    (bad / "empty_object.recipe.json").write_text("{}")
    (bad / "not_json.recipe.json").write_text("{'flags': ['fp16']}")
    recipe = json.loads((FIXTURES / "trt86" / "cls_static_int8_entropy2" / "recipe.json").read_text())
    (bad / "unknown_key.recipe.json").write_text(json.dumps(dict(recipe, flagz=["fp16"])))
    (bad / "zero_shape.recipe.json").write_text(json.dumps(
        dict(recipe, calibration_data=dict(recipe["calibration_data"], opt_shapes={"x": [0, 3, 48, 192]}))))


def fill_argv(argv, ws: Path, user: Path):
    """A table row's arguments with ``{bad}``, ``{ws}`` and ``{user}`` replaced by this workspace's folders."""
    return [a.replace("{bad}", str(ws / "bad")).replace("{ws}", str(ws)).replace("{user}", str(user)) for a in argv]


def run_cli(argv, seconds: float = 120) -> int:
    """``trtwidgets.cli.main(argv)`` in a thread with a time limit: a hang fails the row instead of the suite.

    An exception that escapes ``main`` (the bug the tables look for) is raised here, not lost in the thread.
    """
    import threading

    from trtwidgets.cli import main

    box: Dict[str, object] = {}

    def call() -> None:
        try:
            box["rc"] = main(argv)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{argv} still running after {seconds} s"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["rc"]  # type: ignore[return-value]


def fresh_user_files(ws: Path) -> Path:
    """``ws/user`` made again from scratch for one row: a row that changed it cannot hide the next row's harm."""
    folder = ws / "user"
    if folder.exists():
        shutil.rmtree(folder)
    make_user_files(folder)
    return folder


def assert_api_refusal(call, ws: Path, user: Path, seconds: float = 120) -> None:
    """``call(ws, ws / "bad", user)`` raises a UserError with what, why and fix, in time, and leaves ``user`` as it was."""
    import threading

    from trtwidgets.core.common.errors import UserError

    before = fingerprint(user)
    box: Dict[str, object] = {}

    def target() -> None:
        try:
            call(ws, ws / "bad", user)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    err = box.get("error")
    assert isinstance(err, UserError), f"expected a UserError, got {err!r}"
    assert err.what and err.why and err.fix, err.message
    assert fingerprint(user) == before
