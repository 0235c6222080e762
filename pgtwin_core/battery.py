"""``BatteryArbitrage-v0``: store solar energy in a battery and sell it when the price is high.

A gymnasium environment derived from a StackExchange question's reward function
(``transform_actions_to_reward``), with its bugs fixed:

* the discharged energy is now taken out of the battery (the original never removed it,
  so the agent could sell the same charge every hour);
* energy pushed into a full battery is spilled, never created (the original's ``fill_bat``
  had no capacity bookkeeping visible to the reward);
* the reward is defined for every price (the original left ``reward`` unbound for any
  price other than exactly 0 or 1);
* the reward uses the price the agent saw, i.e. the price at the start of the step.

Importing this module registers the id with gymnasium (once; re-imports are harmless).
"""
from __future__ import annotations

import math
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

ENV_ID = "BatteryArbitrage-v0"

HOURS_PER_DAY = 24
HOURS_PER_WEEK = 7 * HOURS_PER_DAY  # 168: one episode


class BatteryArbitrageEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """A solar producer with a battery, selling to a grid whose price is low or high.

    Time: one step is one hour; an episode is ``episode_length`` hours (default 168, one
    week) starting at midnight, after which ``truncated`` is True. The env never
    terminates (``terminated`` is always False); the truncation is done here rather than
    by a ``TimeLimit`` wrapper so vectorised copies behave identically.

    Observation ``o_t``: float32 array [3] = ``[energy_t, price_t, charge_t]``
      * ``energy_t`` >= 0: energy produced this hour (kWh). Daylight hours
        ``[sunrise, sunset)`` follow ``peak_energy * sin(pi * (h - sunrise) / (sunset - sunrise))``
        plus Gaussian noise of std ``noise_std``, clipped to ``[0, max_energy]`` with
        ``max_energy = peak_energy + 6 * noise_std`` (a 1e-9 event; it keeps the observation
        space bounded); night hours produce 0 (the noise models clouds, which cannot make
        the sun shine at night).
      * ``price_t`` in {0, 1}: 0 = low, 1 = high. A two-state Markov chain, switching
        low -> high with probability ``p_low_to_high`` and high -> low with probability
        ``p_high_to_low`` each hour; the first hour's price is drawn from the chain's
        stationary distribution, ``P(high) = p_lh / (p_lh + p_hl)``.
      * ``charge_t`` in ``[0, capacity]``: energy held in the battery (kWh).

    Action ``a_t``: float32 array [2] in ``[0, 1]`` = ``(store_fraction, discharge_fraction)``.
    Actions are clipped to ``[0, 1]``; non-finite actions raise ValueError.

    Dynamics of one step, all in kWh::

        discharged = discharge_fraction * charge_t        # taken from the charge at the start
        stored     = store_fraction * energy_t            # sent towards the battery
        sold       = energy_t * (1 - store_fraction) + discharged
        spilled    = max(0, charge_t - discharged + stored - capacity)
        charge_t+1 = charge_t - discharged + stored - spilled

    so ``energy_t + charge_t == sold + charge_t+1 + spilled`` holds every step (``info``
    carries ``sold``, ``stored``, ``discharged`` and ``spilled``).

    Reward ``r_t = +sold`` if ``price_t == 1`` else ``-sold``: selling at the low price is
    penalised, as in the original. ``price_t`` is the price in ``o_t``, the observation
    the action was chosen from, not the next one.

    Args:
        capacity: battery capacity, kWh, > 0.
        peak_energy: noiseless production at solar noon, kWh, >= 0.
        noise_std: std of the additive daylight production noise, kWh, >= 0.
        p_low_to_high: per-hour probability of switching from the low to the high price.
        p_high_to_low: per-hour probability of switching from the high to the low price.
        initial_charge: charge at reset, kWh, in ``[0, capacity]``.
        episode_length: steps per episode (truncation), >= 1.
        sunrise: first daylight hour, in ``[0, 24)``.
        sunset: first dark hour after daylight, in ``(sunrise, 24]``.
        render_mode: only None is supported.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        capacity: float = 10.0,
        peak_energy: float = 5.0,
        noise_std: float = 0.5,
        p_low_to_high: float = 0.2,
        p_high_to_low: float = 0.3,
        initial_charge: float = 0.0,
        episode_length: int = HOURS_PER_WEEK,
        sunrise: int = 6,
        sunset: int = 18,
        render_mode: str | None = None,
    ) -> None:
        _check(capacity > 0, "capacity", capacity, "> 0")
        _check(peak_energy >= 0, "peak_energy", peak_energy, ">= 0")
        _check(noise_std >= 0, "noise_std", noise_std, ">= 0")
        _check(0 <= p_low_to_high <= 1, "p_low_to_high", p_low_to_high, "in [0, 1]")
        _check(0 <= p_high_to_low <= 1, "p_high_to_low", p_high_to_low, "in [0, 1]")
        _check(0 <= initial_charge <= capacity, "initial_charge", initial_charge,
               f"in [0, capacity={capacity}]")
        _check(int(episode_length) == episode_length and episode_length >= 1,
               "episode_length", episode_length, "an integer >= 1")
        _check(0 <= sunrise < sunset <= HOURS_PER_DAY, "sunrise/sunset", (sunrise, sunset),
               "0 <= sunrise < sunset <= 24")
        _check(render_mode is None, "render_mode", render_mode, "None")
        self.render_mode = render_mode

        self.capacity = float(capacity)
        self.peak_energy = float(peak_energy)
        self.noise_std = float(noise_std)
        self.p_low_to_high = float(p_low_to_high)
        self.p_high_to_low = float(p_high_to_low)
        self.initial_charge = float(initial_charge)
        self.episode_length = int(episode_length)
        self.sunrise = int(sunrise)
        self.sunset = int(sunset)
        switch_total = self.p_low_to_high + self.p_high_to_low
        # A chain that never switches has no unique stationary law; start it 50/50 then.
        self.p_high_stationary = self.p_low_to_high / switch_total if switch_total > 0 else 0.5
        # Noiseless production per hour of the day, precomputed once so step() only adds noise.
        daylight = self.sunset - self.sunrise
        self._profile = tuple(
            self.peak_energy * math.sin(math.pi * (h - self.sunrise) / daylight)
            if self.sunrise <= h < self.sunset else 0.0
            for h in range(HOURS_PER_DAY)
        )

        self.max_energy = self.peak_energy + 6.0 * self.noise_std
        self.observation_space = spaces.Box(
            low=np.zeros(3, dtype=np.float32),
            high=np.array([self.max_energy, 1.0, self.capacity], dtype=np.float32),
            dtype=np.float32,
        )
        self.action_space = spaces.Box(low=0.0, high=1.0, shape=(2,), dtype=np.float32)

        self._t = 0
        self._energy = 0.0
        self._price = 0.0
        self._charge = self.initial_charge

    def _production(self, t: int) -> float:
        """Energy produced in hour ``t`` of the episode (kWh), a python float >= 0."""
        base = self._profile[t % HOURS_PER_DAY]
        if base <= 0.0:
            return 0.0
        noisy = base + self.noise_std * float(self.np_random.standard_normal())
        return min(self.max_energy, max(0.0, noisy))

    def _obs(self) -> np.ndarray:
        """The observation ``[energy, price, charge]``, float32 [3]."""
        return np.array([self._energy, self._price, self._charge], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new week at midnight with ``initial_charge``; returns ``(obs, {})``."""
        super().reset(seed=seed)
        self._t = 0
        self._charge = self.initial_charge
        self._price = 1.0 if float(self.np_random.random()) < self.p_high_stationary else 0.0
        self._energy = self._production(0)
        return self._obs(), {}

    def step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Apply ``action`` (float [2]) for one hour; see the class docstring for the dynamics."""
        if np.shape(action) != (2,):
            raise ValueError(f"action must have shape (2,), got shape {np.shape(action)}")
        store_fraction = float(action[0])
        discharge_fraction = float(action[1])
        if not (math.isfinite(store_fraction) and math.isfinite(discharge_fraction)):
            raise ValueError(f"action must be finite, got {action!r}")
        # Agents pass clipped actions already; clip again so a stray sample cannot create energy.
        store_fraction = min(1.0, max(0.0, store_fraction))
        discharge_fraction = min(1.0, max(0.0, discharge_fraction))

        energy, charge = self._energy, self._charge
        discharged = discharge_fraction * charge
        stored = store_fraction * energy
        sold = energy - stored + discharged
        charge_after = charge - discharged + stored
        spilled = max(0.0, charge_after - self.capacity)
        # min() also absorbs a rounding overshoot so the charge never leaves [0, capacity].
        self._charge = max(0.0, min(self.capacity, charge_after - spilled))
        reward = sold if self._price == 1.0 else -sold

        self._t += 1
        switch = self.p_high_to_low if self._price == 1.0 else self.p_low_to_high
        if float(self.np_random.random()) < switch:
            self._price = 1.0 - self._price
        self._energy = self._production(self._t)
        truncated = self._t >= self.episode_length
        info = {"sold": sold, "stored": stored, "discharged": discharged, "spilled": spilled}
        return self._obs(), reward, False, truncated, info


def _check(ok: bool, name: str, value: Any, expected: str) -> None:
    """Raise ValueError naming the constructor argument ``name`` unless ``ok``."""
    if not ok:
        raise ValueError(f"BatteryArbitrageEnv: {name} must be {expected}, got {value!r}")


if ENV_ID not in gymnasium.registry:
    gymnasium.register(
        id=ENV_ID,
        entry_point="pgtwin_core.battery:BatteryArbitrageEnv",
        # None: the env truncates itself, so no TimeLimit wrapper truncates it a second time.
        max_episode_steps=None,
    )
