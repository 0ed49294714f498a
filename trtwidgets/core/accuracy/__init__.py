"""Accuracy: metrics, reference data, intermediate tensors, per-layer errors and the sensitivity sweep."""
