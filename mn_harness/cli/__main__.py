"""`python -m mn_harness.cli ...`, the same as `mn-harness ...`."""

import sys

from mn_harness.cli import main

sys.exit(main())
