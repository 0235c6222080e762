"""What ``pgtwin train`` says about updates that were skipped, and when it gives up.

An update is skipped (weights and optimizer state untouched) for one of
``pgtwin_core.loop.SKIP_REASONS``. Each skip is counted by reason in the run's summary; the
first of each reason is explained on stderr; and ``RunSettings.max_consecutive_skips`` skips
in a row stop the run with an error, because a run whose updates are all skipped is not
training (an lr of 1000 on Pendulum skipped 9 of 10 updates and used to exit 0).
"""
from __future__ import annotations

from typing import Any

from pgtwin_core.loop import NON_FINITE, NO_COMPLETE_EPISODE

MAX_CONSECUTIVE_SKIPS = 10
"""Default of ``RunSettings.max_consecutive_skips`` (``--max-consecutive-skips``): a run
whose last 10 updates changed nothing has stopped training."""

ADVICE = {
    NON_FINITE: "lower --lr, set --max-grad-norm, or standardise returns (--normalize-returns)",
    NO_COMPLETE_EPISODE: "raise --num-steps (twice the longest episode gives every env one), "
                         "or use --baseline optimal_scalar",
}


def first_skip_message(reason: str, update: int, metrics: dict[str, Any], num_steps: int,
                       baseline: str, limit: int) -> str:
    """The stderr line for the first skip of ``reason`` in a run."""
    if reason == NO_COMPLETE_EPISODE:
        why = (f"the batch holds no complete episode (every episode was longer than "
               f"--num-steps {num_steps} or cut by the batch edge), so baseline={baseline!r} "
               "skipped it")
    else:
        why = (f"the loss or gradient was not finite (loss {metrics.get('loss')}, gradient "
               f"norm {metrics.get('grad_norm')}), so it was skipped: weights and optimizer "
               "state are unchanged")
    stop = (f"; {limit} skips in a row stop the run (--max-consecutive-skips)" if limit
            else "")
    return (f"update {update}: {why}. To avoid it, {ADVICE[reason]}. Further skips are "
            f"counted in the summary (skipped_updates){stop}.")


def stall_message(consecutive: dict[str, int], total: int) -> str:
    """Why a run stopped after ``total`` skips in a row (``consecutive``: by reason)."""
    reasons = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in consecutive.items())
    advice = "; ".join(ADVICE[reason] for reason in consecutive)
    return (f"the last {total} updates were all skipped ({reasons}), so the run is not "
            f"training: {advice} (--max-consecutive-skips 0 never stops)")
