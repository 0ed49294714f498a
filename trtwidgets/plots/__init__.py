"""Plotly figure builders, one Display class or function per figure.

Plotly is imported inside the drawing methods, so importing this package (and
building the Display data objects) needs only numpy.
"""
