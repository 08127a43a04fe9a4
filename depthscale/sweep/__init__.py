"""Sweeps: from a grid of models to trained groups and result rows."""
