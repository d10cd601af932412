"""`python -m mn_harness.worker SPEC.json`: the worker started in each emulated host."""

import sys

from mn_harness.worker.main import main

sys.exit(main())
