"""Importing this module puts oobleck-planner's modules in place of Oobleck's planner
modules (oobleck_planner.oobleck.install()). Usable as a pytest plugin:
`python -m pytest -p oobleck_planner.oobleck.shadow tests/...`."""

from oobleck_planner.oobleck import install

install()
