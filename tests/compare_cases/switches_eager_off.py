"""Old code that switches eager execution off at import (never import this in the test process:
the harness refuses the call at its line, but a test of that runs in a subprocess)."""
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()


def tf1():  # never reached: the import above is refused
    raise AssertionError("unreachable")
