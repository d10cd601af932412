"""MLCommons Chakra execution traces: our own decoder, encoder and phase conversion."""
