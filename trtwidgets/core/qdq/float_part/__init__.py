"""The float part of a Q/DQ model: every tensor and layer outside the INT8 regions, and its precision.

One room for one idea. :mod:`.convert` writes the float part in FP16 or BF16 for a strongly typed build
(keeping FP32 where a schema or the value range needs it), :mod:`.report` records what it changed,
:mod:`.weight_scales` keeps a stored weight's FP16 scale exact, :mod:`.as_written` joins the export's
records with what the conversion wrote, :mod:`.layer_pins` names the float part for a weakly typed build's
FP16 precision pins (TensorRT 8.6), and the export check compares float parts alone:
:mod:`.same_quantization` (the FP32 reference quantized as the export is), :mod:`.storage` (FP16 storage
as TensorRT's kernels hold it, runnable by ONNX Runtime) and :mod:`.held_quantizers` (every quantizer held
at the reference's integers).
"""
