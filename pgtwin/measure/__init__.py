"""Measurements: ``pgtwin bench``'s engine (``bench``) and the baselines' gradient variance
(``baseline_variance``, ``python -m pgtwin.measure.baseline_variance``)."""
