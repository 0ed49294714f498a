"""``trtwidgets summary MODEL [--json]``: what the model is, before anything else."""

from __future__ import annotations

import json

NAME = "summary"
HELP = "summarise an ONNX model: I/O, dynamic dims, ops, parameters, Q/DQ nodes"


def add_arguments(parser):
    parser.add_argument("model", help="path of the .onnx file")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def format_summary(s) -> str:
    """The summary as aligned plain text."""
    from ..core.model.dim_text import dim_text, tensor_shape_text

    lines = [f"model      {s.path}", f"producer   {s.producer or '-'}",
             f"IR / opset {s.ir_version} / " + ", ".join(f"{d or 'ai.onnx'}:{v}" for d, v in s.opsets.items())]
    for kind, tensors in (("input", s.inputs), ("output", s.outputs)):
        for t in tensors:
            # Exporters' dim names (p2o.DynamicDimension.0) read as N×3×H×W; the names themselves follow.
            dyn = (f"  dynamic: {', '.join(f'dim {i} {dim_text(n, i, len(t.shape))} ({n})' for i, n in t.dynamic_dims.items())}"
                   if t.is_dynamic else "")
            lines.append(f"{kind:<10} {t.name}  {t.dtype} {tensor_shape_text(t)}{dyn}")
    lines.append(f"nodes      {s.node_count}  ({', '.join(f'{k} {v}' for k, v in list(s.op_counts.items())[:8])}"
                 + (", ..." if len(s.op_counts) > 8 else "") + ")")
    lines.append(f"parameters {s.param_count:,} ({s.param_bytes / 1e6:.2f} MB)  dtypes: "
                 + (", ".join(f"{k} {v}" for k, v in s.initializer_dtypes.items()) or "-"))
    q = s.qdq
    lines.append(f"Q/DQ       {q.count} nodes" + (f" ({q.quantize} Q, {q.dequantize} DQ; per-tensor {q.per_tensor}, "
                                                  f"per-channel {q.per_channel}; {', '.join(f'{k} {v}' for k, v in q.dtypes.items())})"
                                                  if q.count else ""))
    return "\n".join(lines)


def run(args) -> int:
    from ..core.model.load import load_model

    summary = load_model(args.model).summary
    print(json.dumps(summary.to_dict(), indent=2) if args.json else format_summary(summary))
    return 0
