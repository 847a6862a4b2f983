"""A PromQL engine over in-memory series, following Prometheus 2.x evaluation semantics.

Queries are parsed by ``promql-parser``; the common subset is evaluated and anything else raises
:class:`PromQLError` naming the construct, so an answer is either Prometheus' answer or an error.

`engine` evaluates (`PromQLEngine`) over the store side in `selection`; `syntax` parses and
reads a query, `values` holds the value types and the pure numeric helpers, and `limits` the
errors and the limits a query must stay within.
"""

from itbench.environments.sim.promql.engine import PromQLEngine
from itbench.environments.sim.promql.limits import (
    DEFAULT_LIMITS,
    PromQLError,
    QueryLimitError,
    QueryLimits,
    check_query_limits,
)
from itbench.environments.sim.promql.values import format_value

__all__ = [
    "DEFAULT_LIMITS",
    "PromQLEngine",
    "PromQLError",
    "QueryLimitError",
    "QueryLimits",
    "check_query_limits",
    "format_value",
]
