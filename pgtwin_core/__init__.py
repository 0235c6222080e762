"""pgtwin_core: the TensorFlow-free layer both twins stand on.

Environments (gymnasium), rollouts, action sampling, returns, policy specs and their
initial numpy weights, configuration and input validation. Importing it registers the
``BatteryArbitrage-v0`` environment with gymnasium.
"""
__version__ = "0.1.0"
from pgtwin_core import battery as _battery  # noqa: E402,F401  (registers BatteryArbitrage-v0)
