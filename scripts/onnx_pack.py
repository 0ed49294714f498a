"""ONNX files that share weights, packed with each weight stored once (a GPU run's carry is size-limited).

    python scripts/onnx_pack.py pack DIR A.onnx B.onnx ...      # DIR/weights.bin, DIR/<name>.graph.onnx, DIR/pack.json
    python scripts/onnx_pack.py unpack DIR OUT_DIR               # OUT_DIR/<name>.onnx, byte for byte the files packed

A float model, its rewritten graph and a peer's Q/DQ models of both hold the same FP32 weights (issue 44: 4 x 12 MB of
the 320x320 YOLO). ``pack`` writes every initializer's ``raw_data`` of 1 KiB or more once into ``weights.bin`` and
each model as a small graph referring to it (ONNX external data: location, offset, length); ``unpack`` reads them
back into self-contained files and checks each against the SHA-256 recorded when packing (a mismatch is printed, and
the exit status stays 0: another protobuf may serialize the same model otherwise). Python 3.9 with onnx only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

WEIGHTS = "weights.bin"
MIN_BYTES = 1024


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pack(out: Path, models) -> dict:
    """Write ``out/weights.bin``, ``out/<stem>.graph.onnx`` per model and ``out/pack.json``; the manifest."""
    import onnx

    out.mkdir(parents=True, exist_ok=True)
    seen: dict = {}
    manifest = {"weights": WEIGHTS, "models": {}}
    with open(out / WEIGHTS, "wb") as w:
        for path in map(Path, models):
            m = onnx.load(str(path))
            moved = 0
            for t in m.graph.initializer:
                raw = t.raw_data
                if len(raw) < MIN_BYTES:
                    continue
                h = hashlib.sha256(raw).hexdigest()
                if h not in seen:
                    seen[h] = (w.tell(), len(raw))
                    w.write(raw)
                off, n = seen[h]
                t.ClearField("raw_data")
                t.data_location = onnx.TensorProto.EXTERNAL
                for k, v in (("location", WEIGHTS), ("offset", str(off)), ("length", str(n))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
                moved += 1
            graph = out / f"{path.stem}.graph.onnx"
            onnx.save(m, str(graph))
            manifest["models"][path.stem] = {"graph": graph.name, "sha256": _sha(path), "bytes": path.stat().st_size,
                                             "external_tensors": moved}
    manifest["weights_bytes"] = (out / WEIGHTS).stat().st_size
    (out / "pack.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def unpack(src: Path, out: Path) -> dict:
    """Every packed model back as ``out/<stem>.onnx``; stem -> True where its SHA-256 is the packed file's."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_model

    manifest = json.loads((src / "pack.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    same = {}
    for stem, rec in manifest["models"].items():
        m = onnx.load(str(src / rec["graph"]), load_external_data=False)
        load_external_data_for_model(m, str(src))
        for t in m.graph.initializer:
            if t.HasField("data_location"):
                t.ClearField("data_location")
            del t.external_data[:]
        path = out / f"{stem}.onnx"
        path.write_bytes(m.SerializeToString())
        same[stem] = _sha(path) == rec["sha256"]
        print(f"unpacked {path} ({path.stat().st_size} bytes){'' if same[stem] else ': SHA-256 differs from the packed file'}",
              flush=True)
    return same


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("dir")
    p.add_argument("models", nargs="+")
    u = sub.add_parser("unpack")
    u.add_argument("dir")
    u.add_argument("out")
    a = ap.parse_args(argv)
    if a.cmd == "pack":
        man = pack(Path(a.dir), a.models)
        print(json.dumps({k: v["external_tensors"] for k, v in man["models"].items()}), man["weights_bytes"])
        return 0
    same = unpack(Path(a.dir), Path(a.out))
    if not all(same.values()):  # said, not fatal: another protobuf may serialize the same model otherwise
        print("note: SHA-256 differs for " + ", ".join(k for k, v in same.items() if not v), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
