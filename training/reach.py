"""No launch waits forever (issue 25 item 6): every node reaches the master before its torchrun starts,
and a rendezvous that does not complete ends at its deadline (launch.rendezvous_timeout_s, torchrun's
`--rdzv-conf timeout=`) with a message naming the nodes that did not join. The refusal before the start
is checks/cluster/launch_routes.py's refuse_unrouted_nodes, beside the spec's own.

The two lines torch's static rendezvous prints at its deadline (torch/distributed/elastic/rendezvous/
static_tcp_rendezvous.py through c10d's TCPStore; torch 2.x):
- on a node that cannot reach the master: `torch.distributed.DistNetworkError: The client socket has timed
  out after 8000ms while trying to connect to (127.0.0.1, 29977).`
- on the master: `torch.distributed.DistStoreError: Timed out after 301 seconds waiting for clients.
  1/2 clients joined.`
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["rendezvous_failure"]

_CLIENT = re.compile(r"client socket has timed out after (\d+)ms while trying to connect to "
                     r"\(([^,]+), (\d+)\)")
_SERVER = re.compile(r"Timed out after (\d+) seconds waiting for clients\. (\d+)/(\d+) clients joined")


def rendezvous_failure(outcomes: Sequence, master: str, port: int) -> str | None:
    """What a job whose rendezvous timed out says first: the nodes that could not join and the deadline
    (None when no node failed in the rendezvous). `outcomes`: fleet.job.NodeOutcome of every node."""
    clients, server = [], None
    for o in outcomes:
        text = o.error or ""
        if m := _CLIENT.search(text):
            clients.append((o.name, int(m[1]) / 1000))
        elif m := _SERVER.search(text):
            server = (o.name, int(m[1]), int(m[2]), int(m[3]))
    if clients:
        names = ", ".join(n for n, _ in clients)
        return (f"the rendezvous did not complete: {names} could not connect to the master {master}:{port} "
                f"within {clients[0][1]:g} s (launch.rendezvous_timeout_s)")
    if server:
        name, s, joined, want = server
        others = [o.name for o in outcomes if o.name != name]
        return (f"the rendezvous did not complete: only {joined} of {want} nodes joined the master {name} "
                f"({master}:{port}) within {s} s; not joined: one or more of {', '.join(others)}")
    return None
