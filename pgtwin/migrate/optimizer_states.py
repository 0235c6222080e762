"""What a checkpoint conversion does with the optimizer's state (both converters take it).

``auto`` converts Adam's state (m, v, step count), or, into a user's Keras SGD with
momentum or RMSprop, TF1 ``MomentumOptimizer``'s or ``RMSPropOptimizer``'s slots, when the
source holds it, and starts the optimizer fresh otherwise; ``convert`` requires it;
``reset`` drops it.
"""
OPTIMIZER_STATES = ("auto", "convert", "reset")
