"""Print the GPU evidence table of docs/placement.md from the TensorRT 8.6 block builds.

The table is generated, not typed: ``tests/fixtures/trt86/qdq_blocks.json`` is what
``tests/gpu/test_qdq_blocks.py`` recorded on the GPU (each block's engine layers), and
``tests/test_placement_doc.py`` fails when the table in docs/placement.md is not this
script's output for the committed fixture. After a new GPU run::

    python3 scripts/placement_evidence.py --write   # rewrites the table in docs/placement.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Mapping

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "trt86" / "qdq_blocks.json"
DOC = ROOT / "docs" / "placement.md"
START, END = "<!-- evidence:start -->", "<!-- evidence:end -->"

#: Which placement rule each block variant is evidence for (the rules of trtwidgets/core/qdq/placement.py).
RULES: Dict[str, str] = {
    "residual": "1, 2", "pool_classifier": "1, 3", "concat_resize": "1, 9", "transpose_head": "1",
    "depthwise_hardswish": "6", "squeeze_excite": "5, 6", "squeeze_excite-no-rule6": "6 (off)",
    "encoder_layer": "4", "conv_silu": "SiLU fusion", "conv_gelu": "4 (GELU)", "leaky_prelu": "Leaky/PReLU fusion",
    "c2f": "9", "sppf": "3, 9", "upsample_neck": "9", "dfl_head": "10", "mlp_gelu_tanh": "4 (GELU)",
    "vit_attention": "4 (attention)",
}


def _rule(key: str) -> str:
    if key in RULES:
        return RULES[key]
    base, _, variant = key.partition("-")
    extra = {"dense": "8", "fp16pin": "FP16 float part", "no-rule9": "9 (off)"}.get(variant, variant)
    return f"{RULES.get(base, '')}; {extra}".strip("; ")


def _row(key: str, block: Mapping) -> List[str]:
    layers = block["layers"]

    def count(pred) -> int:
        return sum(1 for layer in layers if pred(layer))

    myelin = count(lambda l: l["type"] == "Myelin" or l["name"].startswith("{ForeignNode["))
    return [key, _rule(key), str(len(layers)), str(count(lambda l: l["precision"] == "INT8")),
            str(count(lambda l: l["type"] == "Reformat")), str(count(lambda l: l["type"] == "PointWise")),
            str(count(lambda l: l["type"] == "Scale")), str(len(block.get("fp32_compute", []))),
            f"{len(block.get('quantized_by_export', []))}" + (f" (Myelin {myelin})" if myelin else "")]


def table(blocks: Mapping[str, Mapping]) -> str:
    """The Markdown evidence table, one row per built block variant."""
    head = ["block", "rule", "layers", "INT8 layers", "reformats", "PointWise", "Scale", "FP32 compute",
            "quantized by export"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_row(k, blocks[k])) + " |" for k in blocks]
    return "\n".join(lines)


def render(doc_text: str, blocks: Mapping[str, Mapping]) -> str:
    """``doc_text`` with the table between the evidence markers replaced."""
    before, _, rest = doc_text.partition(START)
    _, _, after = rest.partition(END)
    return f"{before}{START}\n{table(blocks)}\n{END}{after}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the table in docs/placement.md")
    args = parser.parse_args(argv)
    blocks = json.loads(FIXTURE.read_text())
    if args.write:
        DOC.write_text(render(DOC.read_text(), blocks))
    else:
        print(table(blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
