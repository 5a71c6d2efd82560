"""Environments as candidates (`regressbisect deps`): the pins of two environments, their
difference, each candidate environment built with uv, and the releases of a package between two
versions. Nothing here measures: hunts/deps.py drives the searches over them."""
