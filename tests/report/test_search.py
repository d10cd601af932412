"""mn_harness.report.search: the adaptive step's searches per socket, from cc_telemetry.csv as the
runner writes it (results.collect.write_cc_telemetry) and the loader reads it back."""

from mn_harness.report.search import SocketSearch, search_text, socket_searches
from mn_harness.results.collect import write_cc_telemetry
from mn_harness.results.loaders import load_cc_telemetry
from mn_harness.results.schema import CC_TELEMETRY_COLUMNS, CC_TELEMETRY_CSV


def telemetry(src: str, states: str, losses: list[int] | None = None, final: bool = True) -> list[dict]:
    """One socket's rows as read_telemetry() gives them: S searching (slope 32), b as the base CC
    (slope 0), one letter per iteration; with `final`, a last row written at close (mid-iteration,
    its slope 32 so that counting it would look like a search)."""
    losses = losses or [0] * len(states)
    rows = [{col: "" for col in CC_TELEMETRY_COLUMNS} | {
        "src": src, "dst": "10.0.9.1:5000", "cc": "mltcp-reno", "kernel_name": "mlreno_0", "iteration": i + 1,
        "slope": 32.0 if s == "S" else 0.0, "losses": n, "rto": False, "final": False, "bytes": 1000}
        for i, (s, n) in enumerate(zip(states, losses, strict=True))]
    if final:
        rows.append({**rows[-1], "iteration": len(states) + 1, "slope": 32.0, "losses": 99, "final": True})
    return rows


def test_first_search_end_peak_losses_and_relapses_per_socket(tmp_path):
    """The first search's last iteration (8: the loss signal's cut by name; 12: the patience),
    its worst iteration's loss episodes (not the later ones'), and the searches started after it;
    the row written at close counts for nothing; a socket that searched to the end has no end."""
    rows = (telemetry("10.0.1.1:1", "S" * 8 + "b" * 6, [30, 40, 20, 12, 9, 9, 8, 7] + [50] * 6)
            + telemetry("10.0.2.1:2", "S" * 12 + "bbb" + "SS" + "bb" + "S" + "b", final=False)
            + telemetry("10.0.3.1:3", "S" * 10, [1, 2, 3, 0, 0, 0, 0, 0, 0, 0]))
    write_cc_telemetry(rows, tmp_path)
    loaded, malformed = load_cc_telemetry(tmp_path)
    assert malformed == 0 and len(loaded) == len(rows)
    assert {(t.bytes, t.learned_bytes_per_iteration) for t in loaded} == {(1000, None)}  # none learned yet
    assert socket_searches(loaded) == [
        SocketSearch("10.0.1.1:1", first_end=8, peak_losses=40, relapses=0),
        SocketSearch("10.0.2.1:2", first_end=12, peak_losses=0, relapses=2),
        SocketSearch("10.0.3.1:3", first_end=None, peak_losses=3, relapses=0)]


def test_search_text_pools_the_sockets_of_a_rows_runs():
    """Median [min–max] of the ends over every socket, "never" counting as later than any end,
    and the relapses summed; "-" where the runs left no telemetry (a kernel CC)."""
    def s(end, relapses=0):
        return SocketSearch("x", first_end=end, peak_losses=0, relapses=relapses)
    assert search_text([s(8)] * 24) == "8 [8–8] of 24; 0 relapses"
    assert search_text([s(9), s(13, 1), s(None), s(8, 2)]) == "9 [8–never] of 4; 3 relapses"
    assert search_text([s(None), s(None), s(10)]) == "never [10–never] of 3; 0 relapses"
    assert search_text([]) == "-"


def test_a_run_without_telemetry_and_a_malformed_row(tmp_path):
    """No cc_telemetry.csv (a kernel CC's run): no rows, nothing malformed. A row the loader
    cannot read (a truncated line) is counted, not read as a search."""
    assert load_cc_telemetry(tmp_path) == ([], 0)
    learned = [{**row, "learned_bytes_per_iteration": 25_000_000} for row in telemetry("10.0.1.1:1", "SSb")]
    write_cc_telemetry(learned, tmp_path)
    path = tmp_path / CC_TELEMETRY_CSV
    path.write_text(path.read_text().replace("False,0.0", "maybe,0.0", 1))
    loaded, malformed = load_cc_telemetry(tmp_path)
    assert malformed == 1 and len(loaded) == 3
    assert {t.learned_bytes_per_iteration for t in loaded} == {25_000_000}
