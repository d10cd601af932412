"""IterationWatcher (mn_harness/hooks.py): progress counts become one on_iteration call per
(job, iteration), in order."""

from mn_harness.hooks import IterationWatcher


def test_every_finished_iteration_gets_one_call_in_order_even_several_between_polls():
    calls = []
    session = object()
    hooks = [lambda s, job, i: calls.append((s is session, job, i))]
    watcher = IterationWatcher(hooks)
    watcher.poll(session, {"a": 0, "b": 0})
    assert calls == []
    watcher.poll(session, {"a": 1, "b": 0})
    watcher.poll(session, {"a": 1, "b": 3})  # b finished three between two polls
    watcher.poll(session, {"a": 2, "b": 3})
    watcher.poll(session, {"a": 2, "b": 3})  # nothing new: no call
    assert calls == [(True, "a", 0), (True, "b", 0), (True, "b", 1), (True, "b", 2), (True, "a", 1)]


def test_hooks_added_to_the_sessions_list_later_are_called_too():
    hooks: list = []
    watcher = IterationWatcher(hooks)
    seen = []
    watcher.poll(None, {"a": 1})
    hooks.append(lambda s, job, i: seen.append((job, i)))
    watcher.poll(None, {"a": 2})
    assert seen == [("a", 1)]  # iteration 0 was seen before the hook existed


def test_a_hook_that_raises_does_not_get_the_same_iteration_again():
    calls = []

    def hook(s, job, i):
        calls.append(i)
        if i == 0:
            raise RuntimeError("hook failed")

    watcher = IterationWatcher([hook])
    try:
        watcher.poll(None, {"a": 2})
    except RuntimeError:
        pass
    watcher.poll(None, {"a": 2})
    assert calls == [0, 1]
