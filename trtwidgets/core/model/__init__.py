"""The model step: load and summarise an ONNX model, lint it, graph helpers, TensorRT version facts."""
