"""An env module whose own import fails (``tests/test_spaces_before_tensorflow.py``)."""
raise RuntimeError("this env module cannot start: its config is missing")
