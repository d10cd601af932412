"""mn-harness: emulate several DNN training jobs sharing a network, on one Linux machine."""
