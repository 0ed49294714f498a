"""Pure computation: no ipywidgets, IPython, plotly or tensorrt imports.

Every module here imports only the standard library, numpy and onnx at import
time (pandas, onnxruntime and tqdm are imported inside the functions that need
them), so that it runs on Python 3.9 with numpy, onnx and tensorrt alone.
"""
