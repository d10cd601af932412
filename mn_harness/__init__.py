"""mn-harness: emulate several DNN training jobs sharing a network, on one Linux machine."""

__version__ = "0.2.0"
