"""The lesson model: a small text-direction classifier that INT8 really hurts, and how it is made.

The bundled PaddleOCR classifier loses nothing measurable in INT8, so a notebook that hunts for the
layers that lose accuracy (14) or fine-tunes to win it back (11) has nothing real to find with it.
This model has something. It reads the same 48x192 text-line crops (input ``x``, float32
``[N, 3, 48, 192]`` in [-1, 1], PaddleOCR's preprocessing) and answers the same question, upright or
turned by 180 degrees (output ``softmax``, ``[N, 2]``, ``demo.LABELS`` order), so the demo's labelled
set scores it as it is (``demo.orientation_scores(lesson_model.PATH)``)::

    x -> conv (16 filters 8x8, stride 4) -> Relu -> row_mean (mean over the width: 16 x 11 rows)
      -> gamma (a per-channel scale, as a LayerNorm's weight) -> flatten (176 features)
      -> fc1 (MatMul 176x32) + bias -> Relu -> fc2 (MatMul 32x2) + bias -> softmax

:func:`train` fits it in numpy (Adam, cross-entropy) on text lines rendered here with
:func:`.text_lines.render_set` (a seed of their own, none of the shipped set's texts), so the demo's
calibration part (128 samples) calibrates it and its held-back part (1,024 samples) tests it.

**Why INT8 hurts it.** Transformers grow a few activation channels tens of times larger than the rest
(Dettmers et al. 2022, "LLM.int8()"; Bondarenko et al. 2021), carried by a learned per-channel scale
such as a LayerNorm's weight. :func:`with_outliers` gives this model the same shape: ``gamma`` is
:data:`OUTLIER_SCALE` on the :data:`OUTLIER_CHANNELS` channels with the largest features and 1
elsewhere, and fc1's rows for those channels are divided by as much, so the float model computes
exactly what it computed before. INT8 does not: fc1's input gets one scale per tensor (TensorRT's
activations are per tensor), set by the outlier channels, and the other 14 channels are left a few
levels of the int8 grid. Keeping fc1 in float (a float island), or a range that clips the outliers,
wins it back; docs/lesson_model.md has the numbers.

**Quantization-aware training** (notebook 11). :func:`from_onnx` reads the weights back,
:func:`rows` and :func:`head` compute the model in two parts with the Q/DQ export's rounding
(``amax`` given: activations per tensor, weights per output channel, as ``tw.export_qdq`` writes
them), and :func:`qat` fine-tunes the head through that rounding with the straight-through
estimator, the conv part frozen.

Training needs Pillow (rendering); reading and running the shipped model needs onnx and
ONNX Runtime only. ``scripts/make_lesson_model.py`` regenerates the file with :func:`make`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Iterable, Mapping, Optional

import numpy as np

#: The shipped model (made by :func:`make`; ours, the package's licence: LICENSE-models.txt).
PATH = Path(__file__).resolve().parent / "lesson_direction.onnx"
#: Training text lines (each upright and turned) and the seed they and the weights are made with.
TRAIN_LINES = 1600
SEED = 4601
#: The model's shape: conv filters, their size and stride, rows left after the conv, hidden units.
FILTERS, KERNEL, STRIDE, HIDDEN = 16, 8, 4, 32
ROWS = (48 - KERNEL) // STRIDE + 1
#: Training: epochs, batch size, Adam's learning rate.
EPOCHS, BATCH, LEARNING_RATE = 12, 64, 3e-3
#: How many feature channels carry an outlier scale, and how large it is.
OUTLIER_CHANNELS, OUTLIER_SCALE = 2, 64.0
#: The opset of the demo classifier.
OPSET = 11
#: QAT: epochs, Adam's first learning rate (it falls linearly to 0), and the weights it trains.
QAT_EPOCHS, QAT_LEARNING_RATE = 8, 1e-3
QAT_TRAINS = ("gamma", "fc1", "fc1_bias", "fc2", "fc2_bias")

Params = Dict[str, np.ndarray]


def training_set(lines: int = TRAIN_LINES, seed: int = SEED):
    """Grey crops ``(2 lines, 48, 192)`` in [-1, 1] and their labels (0 upright, 1 turned); needs Pillow.

    Lines whose text is in the shipped labelled set are left out, so no test text is trained on.
    """
    from .labelled_set import labelled_set
    from .text_lines import crops, render_set

    shipped = set(labelled_set("all").texts)
    drawn = render_set(lines, seed)
    keep = np.array([str(t) not in shipped for t in drawn["texts"]])
    upright, turned = crops(drawn["strips"][keep], drawn["widths"][keep])
    x = np.concatenate([upright, turned])[..., 0].astype(np.float32) / 127.5 - 1.0
    y = np.repeat(np.array([0, 1]), len(upright))
    return x, y


def _patches(x: np.ndarray) -> np.ndarray:
    """The conv's input patches ``(N, ROWS, columns, KERNEL * KERNEL)`` of grey crops ``(N, 48, 192)``."""
    x = np.ascontiguousarray(x, np.float32)
    n, h, w = x.shape
    cols = (w - KERNEL) // STRIDE + 1
    s = x.strides
    view = np.lib.stride_tricks.as_strided(x, (n, (h - KERNEL) // STRIDE + 1, cols, KERNEL, KERNEL),
                                           (s[0], s[1] * STRIDE, s[2] * STRIDE, s[1], s[2]))
    return view.reshape(n, view.shape[1], cols, KERNEL * KERNEL)


def forward(p: Params, x: np.ndarray) -> Params:
    """The float model in numpy on grey crops: every intermediate, ``logits`` last (``gamma`` is 1 unless given)."""
    patches = _patches(x)
    pre = patches @ p["conv"] + p["conv_bias"]
    r = np.maximum(pre, 0).mean(axis=2).transpose(0, 2, 1)             # (N, FILTERS, ROWS), as row_mean gives it
    return dict(head({"gamma": np.ones((FILTERS, 1), np.float32), **p}, r), patches=patches, pre=pre)


def _logits_gradient(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mean cross-entropy's gradient on the logits: softmax minus the one-hot labels, over the batch."""
    z = logits - logits.max(axis=1, keepdims=True)
    d = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    d[np.arange(len(y)), y] -= 1
    return d / len(y)


def _adam(p: Params, g: Params, m: Params, v2: Params, names: Iterable[str], step: int, rate: float) -> None:
    """One Adam step in place on ``p[name]`` for ``names`` (moments ``m``, ``v2``; ``step`` counts from 1)."""
    for name in names:
        m[name] = 0.9 * m[name] + 0.1 * g[name]
        v2[name] = 0.999 * v2[name] + 0.001 * g[name] * g[name]
        update = (m[name] / (1 - 0.9 ** step)) / (np.sqrt(v2[name] / (1 - 0.999 ** step)) + 1e-8)
        p[name] = (p[name] - rate * update).astype(np.float32)


def _gradients(p: Params, x: np.ndarray, y: np.ndarray) -> Params:
    f = forward(p, x)
    d = _logits_gradient(f["logits"], y)
    g = {"fc2": f["hidden"].T @ d, "fc2_bias": d.sum(axis=0)}
    dh = (d @ p["fc2"].T) * (f["fc1"] > 0)
    g["fc1"], g["fc1_bias"] = f["features"].T @ dh, dh.sum(axis=0)
    d_rows = (dh @ p["fc1"].T).reshape(len(x), FILTERS, ROWS).transpose(0, 2, 1)
    cols = f["pre"].shape[2]
    d_pre = np.repeat(d_rows[:, :, None, :] / cols, cols, axis=2) * (f["pre"] > 0)
    g["conv"] = f["patches"].reshape(-1, KERNEL * KERNEL).T @ d_pre.reshape(-1, FILTERS)
    g["conv_bias"] = d_pre.reshape(-1, FILTERS).sum(axis=0)
    return g


def train(x: np.ndarray, y: np.ndarray, seed: int = SEED, epochs: int = EPOCHS) -> Params:
    """Float weights fitted to grey crops ``x`` and labels ``y`` (Adam, mini-batches, seeded)."""
    rng = np.random.default_rng(seed)
    k, features = KERNEL * KERNEL, FILTERS * ROWS
    p = {"conv": rng.normal(0, np.sqrt(2 / k), (k, FILTERS)), "conv_bias": np.zeros(FILTERS),
         "fc1": rng.normal(0, np.sqrt(2 / features), (features, HIDDEN)), "fc1_bias": np.zeros(HIDDEN),
         "fc2": rng.normal(0, np.sqrt(1 / HIDDEN), (HIDDEN, 2)), "fc2_bias": np.zeros(2)}
    p = {name: v.astype(np.float32) for name, v in p.items()}
    m = {name: np.zeros_like(v) for name, v in p.items()}
    v2 = {name: np.zeros_like(v) for name, v in p.items()}
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(order), BATCH):
            idx = order[i:i + BATCH]
            step += 1
            g = _gradients(p, x[idx], y[idx])
            _adam(p, g, m, v2, g, step, LEARNING_RATE)
    return p


def from_onnx(path=PATH) -> Params:
    """The weights of a lesson model file (:func:`to_onnx`'s layout) as :func:`forward` takes them."""
    import onnx
    from onnx import numpy_helper

    w = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}
    return {"conv": w["conv.weight"].sum(axis=1).reshape(FILTERS, -1).T, "conv_bias": w["conv.bias"],
            "gamma": w["gamma"], "fc1": w["fc1.weight"], "fc1_bias": w["fc1.bias"], "fc2": w["fc2.weight"],
            "fc2_bias": w["fc2.bias"]}


def _qdq_weights(w: np.ndarray, axis: int) -> np.ndarray:
    """Weights rounded as the Q/DQ export rounds them: one symmetric int8 scale per slice along ``axis``."""
    from ..core.calibration.fake_quant import quantize_symmetric, weight_scales

    w = np.asarray(w, np.float32)
    scale, shape = weight_scales(w, axis, 127.0)
    return (quantize_symmetric(w, scale.reshape(shape), 127.0) * scale.reshape(shape)).astype(np.float32)


def _qdq(v: np.ndarray, amax: float) -> np.ndarray:
    from ..core.calibration.fake_quant import fake_quant, symmetric_scale

    return fake_quant(v, symmetric_scale(amax))


def rows(p: Params, x: np.ndarray, amax: Optional[Mapping[str, float]] = None, batch: int = 256) -> np.ndarray:
    """``row_mean``'s output ``(N, FILTERS, ROWS)`` of grey crops ``x``: the conv part, before ``gamma``.

    With ``amax`` (tensor name -> range), the input ``x`` is rounded to int8 at ``amax["x"]`` and the conv's
    weights per filter, as in the Q/DQ export (whose conv sees each grey value three times, a third of the
    weight each).
    """
    conv = p["conv"] if amax is None else 3 * _qdq_weights(p["conv"] / 3, 1)
    out = []
    for i in range(0, len(x), batch):
        xb = x[i:i + batch] if amax is None else _qdq(x[i:i + batch], amax["x"])
        pre = _patches(xb) @ conv + p["conv_bias"]
        out.append(np.maximum(pre, 0).mean(axis=2).transpose(0, 2, 1))
    return np.concatenate(out).astype(np.float32)


def head(p: Params, r: np.ndarray, amax: Optional[Mapping[str, float]] = None) -> Params:
    """The rest of the model on :func:`rows` ``r``: every intermediate, ``logits`` last.

    With ``amax``, ``features`` (fc1's input) and ``hidden`` (fc2's) are rounded to int8 with one scale
    each (``amax["features"]``, ``amax["hidden"]``) and fc1's and fc2's weights with one scale per output
    column: what the Q/DQ export computes. ``features_q``, ``fc1_w``, ``hidden_q`` and ``fc2_w`` are what
    the two MatMuls multiply.
    """
    features = (r * p["gamma"]).reshape(len(r), -1)
    f = {"features": features, "features_q": features, "fc1_w": p["fc1"]}
    if amax is not None:
        f["features_q"], f["fc1_w"] = _qdq(features, amax["features"]), _qdq_weights(p["fc1"], 1)
    f["fc1"] = f["features_q"] @ f["fc1_w"] + p["fc1_bias"]
    f["hidden"] = np.maximum(f["fc1"], 0)
    f["hidden_q"], f["fc2_w"] = f["hidden"], p["fc2"]
    if amax is not None:
        f["hidden_q"], f["fc2_w"] = _qdq(f["hidden"], amax["hidden"]), _qdq_weights(p["fc2"], 1)
    f["logits"] = f["hidden_q"] @ f["fc2_w"] + p["fc2_bias"]
    return f


def _qat_gradients(p: Params, r: np.ndarray, y: np.ndarray, amax: Mapping[str, float]) -> Params:
    """Cross-entropy's gradients through :func:`head`'s rounding, by the straight-through estimator."""
    from ..core.calibration.fake_quant import ste_mask, symmetric_scale

    f = head(p, r, amax)
    d = _logits_gradient(f["logits"], y)
    g = {"fc2": f["hidden_q"].T @ d, "fc2_bias": d.sum(axis=0)}
    # rounding passes the gradient as if it were the identity; a value clamped at the grid's end passes none
    dh = (d @ f["fc2_w"].T) * ste_mask(f["hidden"], symmetric_scale(amax["hidden"])) * (f["fc1"] > 0)
    g["fc1"], g["fc1_bias"] = f["features_q"].T @ dh, dh.sum(axis=0)
    d_features = (dh @ f["fc1_w"].T) * ste_mask(f["features"], symmetric_scale(amax["features"]))
    g["gamma"] = (d_features.reshape(r.shape) * r).sum(axis=(0, 2))[:, None]
    return g


def qat(p: Params, r: np.ndarray, y: np.ndarray, amax: Mapping[str, float], epochs: int = QAT_EPOCHS,
        learning_rate: float = QAT_LEARNING_RATE, trains: Iterable[str] = QAT_TRAINS, seed: int = SEED,
        after_epoch: Optional[Callable[[int, Params], None]] = None) -> Params:
    """Quantization-aware fine-tune of ``p`` on :func:`rows` ``r`` (computed with ``amax``) and labels ``y``.

    The forward pass is :func:`head` with ``amax`` (fixed ranges, as a Q/DQ model has them), the backward
    pass the straight-through estimator; Adam on the weights named in ``trains`` (the conv part is frozen,
    so ``r`` is computed once), the learning rate falling linearly to 0. The float weights are what is
    updated; the forward pass always sees them rounded. ``after_epoch(epoch, weights)`` is called after
    each epoch. Returns new weights; ``p`` is left as it was.
    """
    rng = np.random.default_rng(seed)
    trains = tuple(trains)
    p = {name: np.array(v, np.float32) for name, v in p.items()}
    m = {name: np.zeros_like(p[name]) for name in trains}
    v2 = {name: np.zeros_like(p[name]) for name in trains}
    total, step = epochs * -(-len(r) // BATCH), 0
    for epoch in range(epochs):
        order = rng.permutation(len(r))
        for i in range(0, len(order), BATCH):
            idx = order[i:i + BATCH]
            rate = learning_rate * (1 - step / total)
            step += 1
            _adam(p, _qat_gradients(p, r[idx], y[idx], amax), m, v2, trains, step, rate)
        if after_epoch is not None:
            after_epoch(epoch, p)
    return p


def with_outliers(p: Params, x: np.ndarray) -> Params:
    """The same function with :data:`OUTLIER_CHANNELS` outlier channels: ``gamma`` up, fc1's rows down.

    The channels are those whose features are largest on ``x`` (as a transformer's outlier channels
    are the systematic ones). FP32 computes the same answers; per-tensor INT8 does not.
    """
    features = forward(p, x[:512])["features"].reshape(-1, FILTERS, ROWS)
    channels = np.argsort(-features.max(axis=(0, 2)))[:OUTLIER_CHANNELS]
    gamma = np.ones((FILTERS, 1), np.float32)
    gamma[channels] = OUTLIER_SCALE
    fc1 = p["fc1"].reshape(FILTERS, ROWS, HIDDEN) / gamma[:, :, None]
    return {**p, "gamma": gamma, "fc1": fc1.reshape(FILTERS * ROWS, HIDDEN).astype(np.float32)}


def to_onnx(p: Params, notes: Dict[str, str]):
    """The ONNX model (opset :data:`OPSET`) of weights ``p``; ``notes`` go into its metadata."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    conv = np.repeat(p["conv"].T.reshape(FILTERS, 1, KERNEL, KERNEL) / 3, 3, axis=1)   # grey = mean of R, G, B
    weights = {"conv.weight": conv, "conv.bias": p["conv_bias"], "gamma": p["gamma"], "fc1.weight": p["fc1"],
               "fc1.bias": p["fc1_bias"], "fc2.weight": p["fc2"], "fc2.bias": p["fc2_bias"]}
    node = helper.make_node
    nodes = [node("Conv", ["x", "conv.weight", "conv.bias"], ["conv"], name="conv", kernel_shape=[KERNEL] * 2,
                  strides=[STRIDE] * 2),
             node("Relu", ["conv"], ["conv_relu"], name="conv_relu"),
             node("ReduceMean", ["conv_relu"], ["rows"], name="row_mean", axes=[3], keepdims=0),
             node("Mul", ["rows", "gamma"], ["scaled"], name="gamma"),
             node("Flatten", ["scaled"], ["features"], name="flatten", axis=1),
             node("MatMul", ["features", "fc1.weight"], ["fc1_mm"], name="fc1"),
             node("Add", ["fc1_mm", "fc1.bias"], ["fc1"], name="fc1_bias"),
             node("Relu", ["fc1"], ["hidden"], name="fc1_relu"),
             node("MatMul", ["hidden", "fc2.weight"], ["fc2_mm"], name="fc2"),
             node("Add", ["fc2_mm", "fc2.bias"], ["logits"], name="fc2_bias"),
             node("Softmax", ["logits"], ["softmax"], name="softmax", axis=1)]
    graph = helper.make_graph(
        nodes, "lesson_direction", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 48, 192])],
        [helper.make_tensor_value_info("softmax", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(np.asarray(v, np.float32), name) for name, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=7,
                              producer_name="trtwidgets.demo.lesson_model")
    helper.set_model_props(model, notes)
    onnx.checker.check_model(model)
    return model


def make(path=PATH) -> Path:
    """Render the training lines, train, add the outlier channels and write the model to ``path``."""
    import platform

    import onnx
    import PIL

    x, y = training_set()
    p = with_outliers(train(x, y), x)
    notes = {"trained_on": f"{len(x)} crops of {TRAIN_LINES} text lines rendered with seed {SEED} "
                           "(trtwidgets.demo.text_lines.render_set), none of text_lines.npz's texts",
             "outliers": f"gamma {OUTLIER_SCALE:g} on channels "
                         f"{', '.join(str(int(c)) for c in np.flatnonzero(p['gamma'].ravel() != 1))}",
             "pillow": PIL.__version__, "numpy": np.__version__, "python": platform.python_version(),
             "license": "Apache-2.0 (trtwidgets)"}
    onnx.save(to_onnx(p, notes), str(path))
    return Path(path)
