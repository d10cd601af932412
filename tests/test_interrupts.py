"""SIGTERM/SIGHUP as Ctrl-C (mn_harness/interrupts.py), with real signals sent to this process."""

import os
import signal
import threading
import time

import pytest

from mn_harness.interrupts import Interrupted, terminate_as_interrupt


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_signal_inside_the_block_is_a_keyboard_interrupt_and_the_old_handler_comes_back(sig):
    before = signal.getsignal(sig)
    torn_down = []
    with pytest.raises(KeyboardInterrupt) as caught:
        with terminate_as_interrupt():
            try:
                os.kill(os.getpid(), sig)
                time.sleep(10)  # the handler raises at once, cutting the sleep short
            finally:
                torn_down.append(True)
    assert isinstance(caught.value, Interrupted) and str(sig.value) in str(caught.value)
    assert torn_down == [True]
    assert signal.getsignal(sig) is before


def test_from_another_thread_the_handlers_are_left_alone():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    seen = {}

    def body():
        with terminate_as_interrupt():
            seen.update({s: signal.getsignal(s) for s in before})

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == before
