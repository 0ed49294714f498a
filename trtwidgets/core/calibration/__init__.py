"""Calibration: data, streaming collection, histograms, range methods, statistics, caches, explorer data."""
