"""pgtwin_core: the TensorFlow-free layer both twins stand on.

Environments (gymnasium), rollouts, action sampling, returns, policy specs and their
initial numpy weights, configuration and input validation, and the training loop both
twins run. Importing it registers the ``BatteryArbitrage-v0`` environment with gymnasium.
The names below are its public surface; the modules hold the rest.
"""
__version__ = "0.1.0"
from pgtwin_core import battery as _battery  # noqa: E402,F401  (registers BatteryArbitrage-v0)
from pgtwin_core.config import BASELINES, DTYPES, OPTIMIZERS, ReinforceConfig  # noqa: E402
from pgtwin_core.envs import make_vec_env  # noqa: E402
from pgtwin_core.errors import (DisconnectedGradientError, IncompatibleCheckpointError,  # noqa: E402
                                NoCompleteEpisodeError)
from pgtwin_core.loop import iterate_training  # noqa: E402
from pgtwin_core.returns import discounted_returns, normalize  # noqa: E402
from pgtwin_core.rollout import Batch, RolloutState, collect  # noqa: E402
from pgtwin_core.specs import PolicySpec, init_weights, spec_for_env  # noqa: E402

__all__ = [
    "BASELINES", "DTYPES", "OPTIMIZERS", "ReinforceConfig", "PolicySpec", "spec_for_env",
    "init_weights", "make_vec_env", "Batch", "RolloutState", "collect", "discounted_returns",
    "normalize", "iterate_training", "DisconnectedGradientError", "NoCompleteEpisodeError",
    "IncompatibleCheckpointError",
]
