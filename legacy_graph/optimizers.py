"""``tf.compat.v1.train`` optimizers with hyperparameters matched to Keras' exactly.

Mirrors ``eager/optimizers.py``. Three differences between TF1 and Keras 3 hide below the
defaults and are removed here, so that float64 runs agree to the last bits:

* epsilon: TF1's AdamOptimizer defaults to 1e-8, Keras to 1e-7 (both passed explicitly);
* TF1 turns Python hyperparameters into float32 tensors, so in a float64 graph beta1 = 0.9
  would become float32(0.9) in the moment updates, where Keras uses float64(0.9): here the
  hyperparameters are tensors of the variables' dtype;
* Keras keeps the learning rate in a float32 variable and computes the bias correction
  ``beta ** t`` from float32-rounded betas (``ops.cast`` of a Python float goes through
  floatx): the learning rate and the beta-power accumulators are rounded the same way.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgtwin_core.config import ReinforceConfig

tf1 = tf.compat.v1


class KerasMatchedAdam(tf1.train.AdamOptimizer):
    """TF1 Adam whose bias-correction powers use float32-rounded betas, as Keras 3 does."""

    def __init__(self, learning_rate, beta1, beta2, epsilon, dtype: str):
        self._power_dtype = dtype
        self._power_beta1 = float(np.float32(beta1))
        self._power_beta2 = float(np.float32(beta2))
        super().__init__(
            learning_rate=learning_rate,
            beta1=tf.constant(beta1, dtype=dtype),
            beta2=tf.constant(beta2, dtype=dtype),
            epsilon=tf.constant(epsilon, dtype=dtype),
        )

    def _create_slots(self, var_list):
        first_var = min(var_list, key=lambda x: x.name)
        for name, value in (("beta1_power", self._power_beta1), ("beta2_power", self._power_beta2)):
            self._create_non_slot_variable(
                initial_value=tf.constant(value, self._power_dtype), name=name,
                colocate_with=first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _finish(self, update_ops, name_scope):
        with tf.control_dependencies(update_ops):
            beta1_power, beta2_power = self._get_beta_accumulators()
            update_beta1 = beta1_power.assign(beta1_power * self._power_beta1)
            update_beta2 = beta2_power.assign(beta2_power * self._power_beta2)
        return tf.group(*update_ops + [update_beta1, update_beta2], name=name_scope)


def learning_rate_variable(config: ReinforceConfig, dtype: str) -> tf.Variable:
    """The step size as a variable of ``dtype`` holding ``float32(learning_rate)`` (Keras
    keeps its learning rate in a float32 variable), so that a schedule can set it between
    updates (``ReinforceAgent.set_learning_rate``). A local variable: the ``Saver`` leaves
    it out (a schedule is a function of the env-step counter, which the run's checkpoint
    holds), so the checkpoint layout is that of a constant learning rate."""
    return tf1.Variable(tf.constant(np.float32(config.learning_rate), dtype=dtype),
                        trainable=False, name="learning_rate",
                        collections=[tf1.GraphKeys.LOCAL_VARIABLES])


def make_optimizer(config: ReinforceConfig, dtype: str,
                   learning_rate: tf.Tensor | None = None) -> tf1.train.Optimizer:
    """Adam or plain SGD for variables of ``dtype``, built in the current graph.

    ``learning_rate``: a tensor of ``dtype`` (``learning_rate_variable``); None: the
    config's, as a constant rounded to float32.
    """
    lr = learning_rate
    if lr is None:
        lr = tf.constant(np.float32(config.learning_rate), dtype=dtype)
    if config.optimizer == "sgd":
        return tf1.train.GradientDescentOptimizer(lr)
    return KerasMatchedAdam(lr, config.adam_beta1, config.adam_beta2, config.adam_epsilon, dtype)
