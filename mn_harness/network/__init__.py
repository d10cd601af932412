"""Network layer: the addressing/routing plan and the Mininet network built from it."""
