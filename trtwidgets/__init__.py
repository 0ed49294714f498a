"""trtwidgets: Jupyter widgets for exploratory TensorRT quantization.

The package is layered (see DESIGN.md): ``trtwidgets.core`` is pure computation,
``trtwidgets.trt`` is the only package that imports TensorRT, ``trtwidgets.plots``
builds Plotly figures and ``trtwidgets.widgets`` is a thin ipywidgets layer.
Nothing heavy is imported here so that ``import trtwidgets.core`` works with only
numpy and onnx installed (the GPU machine runs Python 3.9 with just those).
"""

__version__ = "0.1.0"
