"""How fast do the inspector's filters and sorting respond on a 2,000-layer engine?

Target (issue 5): filtering and sorting stay interactive on 2,000 layers; we aim
at < 100 ms per interaction, measured through the widget (a change of the search
box -> vectorised filter -> HTML of the first 200 rows -> widget state), without
a browser. The engine is synthetic (mixed INT8/FP16/FP32 convolutions and
pointwise layers, TensorRT 8.6 JSON), because the demo model has ~60 layers.

Reference figures printed beside ours: a plain Python loop over the rows for
filtering, and pandas' Styler for rendering the same 200 rows.

Run: ``python benchmarks/inspector_filter.py [--layers 2000] [--repeat 20]``
"""

from __future__ import annotations

import argparse
import json
import time

TARGET_MS = 100.0

_FORMATS = ("Thirty-two wide channel vectorized row major Int8 format",
            "Channel major FP16 format where channel % 8 == 0", "Row major linear FP32")


def synthetic_engine(n: int) -> str:
    layers, prev = [], "x"
    for i in range(n):
        fmt = _FORMATS[i % 3]
        t_in = {"Name": prev, "Location": "Device", "Dimensions": [1, 64, 28, 28], "Format/Datatype": fmt}
        t_out = {"Name": f"t{i}", "Location": "Device", "Dimensions": [1, 64, 28, 28], "Format/Datatype": fmt}
        if i % 5 == 4:
            layers.append({"Name": f"PWN(add_{i}, relu_{i})", "LayerType": "PointWiseV2", "Inputs": [t_in],
                           "Outputs": [t_out], "ParameterType": "PointWise", "TacticValue": "0x9", "StreamId": 0,
                           "Metadata": f"[ONNX Layer: add_{i}]\x1e[ONNX Layer: relu_{i}]"})
        else:
            layers.append({"Name": f"conv_{i} + relu_{i}", "LayerType": "CaskConvolution", "Inputs": [t_in],
                           "Outputs": [t_out], "ParameterType": "Convolution",
                           "Weights": {"Type": ("Int8", "Half", "Float")[i % 3], "Count": 36864},
                           "Bias": {"Type": "Float", "Count": 64},
                           "TacticName": f"sm90_xmma_fprop_implicit_gemm_{i % 7}", "TacticValue": "0x1",
                           "StreamId": 0, "Metadata": f"[ONNX Layer: conv_{i}]\x1e[ONNX Layer: relu_{i}]"})
        prev = f"t{i}"
    return json.dumps({"Layers": layers, "Bindings": ["x", prev]}).replace("\\u001e", "\x1e")


def _ms(fn, repeat: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()

    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.core.engine.layer_table import filter_table, layer_table, styled, table_html
    from trtwidgets.widgets.inspector import SHOWN, Inspector

    text = synthetic_engine(args.layers)
    t0 = time.perf_counter()
    graph = parse_inspector_json(text)
    t1 = time.perf_counter()
    table = layer_table(graph)
    t2 = time.perf_counter()
    print(f"{args.layers} layers: parse {1000 * (t1 - t0):.1f} ms, table + why-not-INT8 {1000 * (t2 - t1):.1f} ms "
          "(once per engine)")

    records = table.to_dict("records")

    def loop_filter():  # the reference: a Python loop over rows
        return [r for r in records if ("relu_1" in r["name"].lower() or "relu_1" in r["onnx_nodes"].lower())
                and r["precision"] == "INT8"]

    rows = [
        ("filter: text", lambda: filter_table(table, text="relu_1"), None),
        ("filter: text + precision", lambda: filter_table(table, text="relu_1", precision="INT8"), loop_filter),
        ("filter: precision + type", lambda: filter_table(table, precision="FP16", layer_type="Convolution"), None),
        ("sort: name", lambda: filter_table(table, sort_by="name"), lambda: sorted(records, key=lambda r: r["name"])),
        ("sort: tactic desc", lambda: filter_table(table, sort_by="tactic", ascending=False), None),
        ("render 200 rows (HTML)", lambda: table_html(table, 200, SHOWN),
         lambda: styled(table[list(SHOWN)], max_rows=200).to_html()),
    ]
    print(f"{'operation':<28} {'ours ms':>9} {'reference ms':>13} {'ratio':>7}")
    for name, ours, ref in rows:
        a = _ms(ours, args.repeat)
        if ref is not None:
            b = _ms(ref, max(3, args.repeat // 4))
            print(f"{name:<28} {a:9.2f} {b:13.2f} {a / b:7.2f}")
        else:
            print(f"{name:<28} {a:9.2f} {'-':>13} {'-':>7}")

    w = Inspector(graph)
    words = ["relu_1", "conv_19", "", "add_4", "relu_199"]
    state = {"i": 0}

    def type_in_search():
        state["i"] += 1
        w.search.value = words[state["i"] % len(words)]

    def pick_precision():
        w.search.value = ""
        w.precision.value = "FP16" if w.precision.value != "FP16" else "INT8"

    def pick_sort():
        w.sort.value = "tactic" if w.sort.value != "tactic" else "name"

    print(f"{'widget interaction':<28} {'ms':>9} {'target ms':>13} {'ratio':>7}")
    for name, fn in (("search box change", type_in_search), ("precision dropdown", pick_precision),
                     ("sort dropdown", pick_sort)):
        a = _ms(fn, args.repeat)
        print(f"{name:<28} {a:9.2f} {TARGET_MS:13.1f} {a / TARGET_MS:7.2f}")


if __name__ == "__main__":
    main()
