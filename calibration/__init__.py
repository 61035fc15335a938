"""Calibration: kernel microbenchmarks on a target GPU, profiles, fitting and importers."""
