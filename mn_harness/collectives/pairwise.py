"""Collectives where ranks talk to many peers directly: all-to-all and the parameter server.

* all-to-all (expert parallelism): every rank holds S bytes cut into n blocks of ceil(S/n);
  block d goes to rank d. In step k (1..n-1, step index k-1) rank r sends its block for rank
  (r+k) mod n, so every rank sends and receives one block per step and no pair waits for
  another: (n-1)/n * S per rank. Nothing depends on an earlier receive (`dependent=False`).
* parameter server: local ranks 0..w-1 are workers, w..w+k-1 the servers; the gradient (S bytes)
  is sharded over the k servers in blocks of ceil(S/k). Step 0: every worker pushes shard j to
  server j (the server adds them); step 1: every server sends its shard (the updated parameters)
  back to every worker. A worker sends and receives S; a server w * S/k each way, so the
  servers' links are the bottleneck unless k >= w."""

from __future__ import annotations

from mn_harness.collectives.bandwidth import share_factor, unit_factor
from mn_harness.collectives.registry import Collective
from mn_harness.collectives.schedule import Schedule, Transfer, ceil_div, need_ranks


def all_to_all(total_bytes: int, n: int) -> Schedule:
    need_ranks("all_to_all", n)
    block = ceil_div(total_bytes, n)
    transfers = tuple(Transfer(k - 1, 0, (r + k) % n, r, (r + k) % n, block)
                      for k in range(1, n) for r in range(n))
    return Schedule("all_to_all", n, total_bytes, transfers, dependent=False)


def parameter_server(total_bytes: int, n: int, servers: int) -> Schedule:
    """n local ranks in all, the last `servers` of them servers."""
    if servers < 1:
        raise ValueError("parameter_server needs at least one server")
    workers = n - servers
    need_ranks("parameter_server (workers)", workers, least=1)
    shard = ceil_div(total_bytes, servers)
    push = [Transfer(0, 0, j, w, workers + j, shard, reduce=True)
            for w in range(workers) for j in range(servers)]
    pull = [Transfer(1, 0, j, workers + j, w, shard)
            for j in range(servers) for w in range(workers)]
    return Schedule("parameter_server", n, total_bytes, tuple(push + pull))


ALL_TO_ALL = Collective("all_to_all", lambda c: all_to_all(c.nbytes, c.ranks), share_factor)
# busbw: ours, S = the gradient's bytes over the workers (not the servers)
PARAMETER_SERVER = Collective("parameter_server", lambda c: parameter_server(c.nbytes, c.ranks, c.servers),
                              unit_factor, uses_servers=True, least_participants=1)
