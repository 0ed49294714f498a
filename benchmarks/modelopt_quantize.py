"""Run NVIDIA ModelOpt's ONNX PTQ on one model (the peer of benchmarks/modelopt_zoo.py; never imported by trtwidgets).

Runs in its own virtual environment (``/work/venv-modelopt``: ``pip install "nvidia-modelopt[onnx]"``), never in
the toolkit's: ModelOpt brings torch, cupy and onnxruntime-gpu. ``modelopt_zoo.py`` calls it as a subprocess::

    /work/venv-modelopt/bin/python benchmarks/modelopt_quantize.py MODEL.onnx CALIB.npz OUT.onnx RESULT.json [fp32]

``CALIB.npz`` holds every input's calibration samples stacked on its batch axis (the toolkit's own calibration
samples). ModelOpt is called with its defaults (``quantize_mode="int8"``, its default calibration method and
placement) except ``calibration_eps=["cpu"]`` (no GPU here). ``RESULT.json`` records whether it wrote a model, the
seconds it took, ModelOpt's version and the options, or the error's last lines.
"""

from __future__ import annotations

import inspect
import json
import sys
import time
import traceback
from pathlib import Path


def main(argv) -> int:
    model, calib, out, result = (Path(a) for a in argv[1:5])
    extra = {"high_precision_dtype": "fp32"} if argv[5:6] == ["fp32"] else {}
    rec = {"model": str(model), "out": str(out), "options": extra}
    t0 = time.perf_counter()
    try:
        import numpy as np

        import modelopt
        from modelopt.onnx.quantization import quantize

        rec["modelopt"] = modelopt.__version__
        defaults = {k: repr(v.default) for k, v in inspect.signature(quantize).parameters.items()
                    if v.default is not inspect.Parameter.empty}
        rec["defaults"] = {k: defaults[k] for k in ("calibration_method", "high_precision_dtype", "op_types_to_quantize",
                                                     "calibration_eps", "calibrate_per_node", "use_external_data_format")
                           if k in defaults}
        with np.load(calib) as z:
            data = {k: z[k] for k in z.files}
        rec["calibration_samples"] = {k: list(v.shape) for k, v in data.items()}
        quantize(str(model), quantize_mode="int8", calibration_data=data, calibration_eps=["cpu"], output_path=str(out),
                 **extra)
        rec["status"] = "ok" if out.is_file() else "no file"
    except BaseException as exc:
        rec["status"] = "failed"
        rec["error"] = f"{type(exc).__name__}: {exc}"[:1500]
        rec["traceback"] = traceback.format_exc()[-3000:]
    rec["seconds"] = round(time.perf_counter() - t0, 2)
    result.write_text(json.dumps(rec, indent=1))
    return 0 if rec["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
