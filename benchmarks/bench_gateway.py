"""The gateway's refusal of hostile queries: time and peak memory to answer a 200 KB PromQL query
and a 5,000-addition one with a bounded `bad-query` problem, on the real simulator, measured from
the encoded request to the answer (the in-process transport, so no client-side URL encoding is
counted). Targets: under 20 ms and under 5 MB of peak allocation per refusal."""

from __future__ import annotations

import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from benchmarks.harness import Figure

ROOT = Path(__file__).resolve().parents[1]
REPEAT = 20


def _refusal(query: str) -> tuple[float, float, int]:
    sys.path.insert(0, str(ROOT / "tests" / "integration" / "gateway"))
    from urllib.parse import urlencode

    from gateway_fakes import Gateway

    from itbench.client import InProcessTransport

    gw = Gateway(inline=True)
    session = gw.open_sim("bench")
    transport = InProcessTransport(gw.app)
    encoded = urlencode({"query": query}).encode()
    headers = [(b"authorization", f"Bearer {session.token}".encode())]
    size = 0

    def refuse() -> None:
        nonlocal size
        status, _, content = transport.exchange(
            "GET", b"/v1/trials/bench/metrics/query", encoded, headers, b""
        )
        if status != 400:
            raise AssertionError(f"the query was not refused: {status}")
        size = len(content)

    refuse()
    samples = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        refuse()
        samples.append(time.perf_counter() - start)
    tracemalloc.start()
    refuse()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    transport.close()
    return statistics.median(samples), peak / 1e6, size


def run() -> list[Figure]:
    """Measure both refusals."""
    figures = []
    for name, query in (
        ("200kb", 'up{a="' + "x" * 200_000 + '"}'),
        ("5000-additions", "+".join(["1"] * 5000)),
    ):
        seconds, peak_mb, size = _refusal(query)
        figures += [
            Figure(f"gateway.refuse_{name}.time", seconds * 1000.0, "ms", target=20.0),
            Figure(f"gateway.refuse_{name}.peak_alloc", peak_mb, "MB", target=5.0),
            Figure(f"gateway.refuse_{name}.problem_size", float(size), "bytes", target=4096.0),
        ]
    return figures
