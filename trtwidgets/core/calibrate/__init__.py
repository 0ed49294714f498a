"""The calibration step: data in, a Calibration out, at a recipe's shapes (``trtwidgets.calibrate``)."""
