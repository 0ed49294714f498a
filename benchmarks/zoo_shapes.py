"""Pin a model's dynamic input dims to one static shape (the zoo builds every engine at a static shape).

Only ``onnx`` and ``numpy``: it runs on the GPU machine's Python 3.9 too, where
``zoo_gpu.py`` makes the batch-32 copy of a model (float or Q/DQ) from its batch-1 file.
"""

from __future__ import annotations

from typing import Dict, Sequence


def input_shapes(model) -> Dict[str, list]:
    """``{input name: [dim value or dim_param or None]}`` of the graph inputs that are not initializers."""
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            dims.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or None))
        out[vi.name] = dims
    return out


def fix_static(model, shapes: Dict[str, Sequence[int]]):
    """A copy of ``model`` whose inputs have exactly ``shapes``; the dims of the graph outputs are cleared.

    Parameters
    ----------
    model : onnx.ModelProto
    shapes : dict
        Input name -> full static shape. A dim already fixed in the model must agree
        (a mismatch is a mistake in the zoo, not something to paper over).

    Returns
    -------
    onnx.ModelProto
        Intermediate ``value_info`` is dropped, since it may carry the old dynamic
        dims; ONNX Runtime and TensorRT infer it again.
    """
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = input_shapes(m)
    missing = set(have) - set(shapes)
    if missing:
        raise ValueError(f"no static shape given for input(s) {sorted(missing)}; inputs: {have}")
    for vi in m.graph.input:
        if vi.name not in shapes:
            continue
        want = [int(v) for v in shapes[vi.name]]
        dims = vi.type.tensor_type.shape.dim
        if len(dims) != len(want):
            raise ValueError(f"input {vi.name!r} has {len(dims)} dims {have[vi.name]}, the shape given has {len(want)}")
        for d, v in zip(dims, want):
            if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != v:
                raise ValueError(f"input {vi.name!r}: dim {d.dim_value} is fixed in the model, {v} was asked for")
            d.Clear()
            d.dim_value = v
    for vo in m.graph.output:
        for i, d in enumerate(vo.type.tensor_type.shape.dim):
            d.Clear()
            d.dim_param = f"{vo.name}_dim{i}"
    del m.graph.value_info[:]
    return m


def with_batch(model, batch: int):
    """``model`` (static at some batch) with every input's first dim set to ``batch``."""
    shapes = {}
    for name, dims in input_shapes(model).items():
        if any(not isinstance(d, int) or d <= 0 for d in dims[1:]):
            raise ValueError(f"input {name!r} has dynamic dims beyond the batch: {dims}; fix them first (fix_static)")
        shapes[name] = [batch] + list(dims[1:])
    return fix_static(_unfix_batch(model), shapes)


def at_shapes(model, shapes: Dict[str, Sequence[int]]):
    """``model`` with each input named in ``shapes`` pinned to exactly that shape, whatever its dims were.

    A plan's ``input_shapes`` are the engine's shapes (batch 32 on axis 0, or a state batched on
    axis 1): unlike :func:`with_batch`, nothing is assumed about where the batch is.
    """
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.name in shapes:
            for d in vi.type.tensor_type.shape.dim:
                d.Clear()
    return fix_static(m, {vi.name: shapes.get(vi.name, [d.dim_value for d in vi.type.tensor_type.shape.dim])
                          for vi in m.graph.input if vi.name not in {t.name for t in m.graph.initializer}})


def _unfix_batch(model):
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name for t in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name not in inits and vi.type.tensor_type.shape.dim:
            d = vi.type.tensor_type.shape.dim[0]
            d.Clear()
            d.dim_param = "batch"
    return m


def _yolov8_anchors(size: int, strides=(8, 16, 32)):
    """YOLOv8's anchor points ``[1, 2, A]`` (grid cell centres) and strides ``[1, A]`` for a square ``size`` input."""
    import numpy as np

    points, per = [], []
    for s in strides:
        n = size // s
        yy, xx = np.meshgrid(np.arange(n) + 0.5, np.arange(n) + 0.5, indexing="ij")
        points.append(np.stack([xx, yy], -1).reshape(-1, 2))
        per.append(np.full(n * n, s))
    return (np.concatenate(points).T[None].astype(np.float32), np.concatenate(per)[None].astype(np.float32))


def yolov8_at(model, batch: int, size: int):
    """A static Ultralytics YOLOv8 export (``images [1, 3, S, S]``) rewritten for ``[batch, 3, size, size]``.

    The export pins its batch and its anchor count in the detection head: the Reshape shapes
    ``[1, 64, -1]`` / ``[1, C, -1]`` / ``[1, 4, 16, A]`` / ``[1, 4, A]`` and the anchor-point and stride
    constants ``[1, 2, A]``, ``[1, A]``. Those are rewritten (the anchors recomputed as Ultralytics'
    ``make_anchors`` does, checked against the file's own values first); everything else is kept.
    ``size`` must be a multiple of 32.
    """
    import numpy as np
    import onnx
    from onnx import numpy_helper

    if size % 32:
        raise ValueError(f"size {size} is not a multiple of 32")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inp = m.graph.input[0]
    old = inp.type.tensor_type.shape.dim[2].dim_value
    old_a, new_a = _yolov8_anchors(old)[1].shape[1], _yolov8_anchors(size)[1].shape[1]
    points, strides = _yolov8_anchors(size)
    old_points, old_strides = _yolov8_anchors(old)
    # The head's constants are initializers in some exports and Constant nodes in others.
    tensors = list(m.graph.initializer) + [n.attribute[0].t for n in m.graph.node
                                            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"]
    changed = 0
    for t in tensors:
        arr = numpy_helper.to_array(t)
        new = None
        if arr.dtype.kind == "i" and arr.ndim == 1 and 3 <= arr.size <= 4 and arr[0] == 1:
            # A Reshape shape of the head: [1, ch, -1] or [1, 4, 16, A] / [1, 4, A].
            if arr[-1] == -1 or arr[-1] == old_a:
                new = arr.copy()
                new[0] = batch
                if arr[-1] == old_a:
                    new[-1] = new_a
        elif arr.shape == old_points.shape and np.array_equal(arr, old_points):
            new = points
        elif arr.shape == old_strides.shape and np.array_equal(arr, old_strides):
            new = strides
        if new is not None:
            t.CopyFrom(numpy_helper.from_array(new.astype(arr.dtype), t.name))
            changed += 1
    if changed < 6:
        raise ValueError(f"only {changed} head constants found to rewrite: not the YOLOv8 export this expects")
    return fix_static(_unfix_batch_and_size(m), {inp.name: [batch, 3, size, size]})


def _unfix_batch_and_size(model):
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for d in m.graph.input[0].type.tensor_type.shape.dim:
        d.Clear()
    return m
