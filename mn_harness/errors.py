"""The errors each layer raises for things a user can fix or must be told about. The CLI
prints them as one line; anything else is a bug and keeps its traceback."""

from mn_harness.cc.errors import CCError
from mn_harness.dataplane.base import DataplaneError
from mn_harness.jobs.launcher import JobError
from mn_harness.network.errors import NetworkError

USER_ERRORS = (CCError, DataplaneError, JobError, NetworkError)
