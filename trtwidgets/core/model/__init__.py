"""The model step: load and summarise an ONNX model, lint it, find its batch axes and cut samples along them."""
