"""gRPC failures as one-line P4RuntimeErrors.

A failed P4Runtime Write says only "INVALID_ARGUMENT" in its status; what went wrong is in
binary trailing metadata (google.rpc.Status with one p4.v1.Error per update). The harness prints
errors as single lines, so this decodes that metadata and names the operation, the switch, the
status, the server's message and the first failed updates, plus a hint when nothing answered."""

from __future__ import annotations

import grpc
from p4.v1 import p4runtime_pb2

from mn_harness.p4.errors import P4RuntimeError

_CODE_NAMES = {sc.value[0]: sc.name for sc in grpc.StatusCode}
_SHOWN_UPDATE_ERRORS = 3


def status_name(code: int) -> str:
    """The gRPC status name ("INVALID_ARGUMENT") of a numeric canonical code."""
    return _CODE_NAMES.get(code, str(code))


def describe_rpc_error(err: grpc.RpcError, operation: str, target: str) -> P4RuntimeError:
    """Turn a grpc.RpcError into a P4RuntimeError with a one-line message."""
    code_obj = err.code() if callable(getattr(err, "code", None)) else None
    code = code_obj.name if code_obj is not None else "UNKNOWN"
    details = (err.details() if callable(getattr(err, "details", None)) else str(err)) or ""
    details = " ".join(details.split())
    update_errors: list[tuple[int, str, str]] = []
    metadata = err.trailing_metadata() if callable(getattr(err, "trailing_metadata", None)) \
        else None
    for key, value in metadata or ():
        if key != "grpc-status-details-bin":
            continue
        try:
            from google.rpc import status_pb2
            status = status_pb2.Status.FromString(value)
        except Exception:  # noqa: BLE001 - malformed details: keep the plain message
            continue
        for i, any_msg in enumerate(status.details):
            p4err = p4runtime_pb2.Error()
            if any_msg.Unpack(p4err) and p4err.canonical_code != 0:
                update_errors.append((i, status_name(p4err.canonical_code),
                                      " ".join(p4err.message.split())))
    parts = [f"P4Runtime {operation} on {target} failed: {code}"]
    if details:
        parts[0] += f": {details}"
    if update_errors:
        shown = "; ".join(f"update #{i} {c}: {m}" if m else f"update #{i} {c}"
                          for i, c, m in update_errors[:_SHOWN_UPDATE_ERRORS])
        hidden = len(update_errors) - _SHOWN_UPDATE_ERRORS
        parts.append(shown + (f" (+{hidden} more)" if hidden > 0 else ""))
    if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") and operation in ("connect", "arbitration"):
        parts.append("is simple_switch_grpc running and listening there?")
    return P4RuntimeError(" -- ".join(parts), code=code, details=details,
                          update_errors=update_errors)
