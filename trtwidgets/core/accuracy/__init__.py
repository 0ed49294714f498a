"""Accuracy: metrics, reference data, per-layer errors and the sensitivity sweep."""
