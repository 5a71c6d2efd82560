"""Throw-away git repositories and fake machines that the tests and scripts/ build hunts on.
Above every other layer: nothing else in the package imports it (tests/test_layering.py)."""
