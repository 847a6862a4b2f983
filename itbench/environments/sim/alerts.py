"""The twin's rule evaluator: Prometheus alerting semantics (pending, `for:`, firing, resolved).

Rules are read from the PrometheusRule objects in the twin, so changing or deleting them changes
what fires; expressions are evaluated by the PromQL engine over the scraped series.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

from itbench.core.alert_rules import AlertRule, render_template, rules_from_manifest
from itbench.core.models.observations import Alert, AlertInterval, AlertState
from itbench.environments.sim.objects import Obj
from itbench.environments.sim.promql import PromQLEngine, PromQLError

log = logging.getLogger(__name__)

LabelKey = tuple[tuple[str, str], ...]


@dataclass
class _Active:
    labels: dict[str, str]
    annotations: dict[str, str]
    active_at: float
    value: float
    fired_at: float | None = None


@dataclass
class AlertEvaluator:
    """Evaluates alerting rules at fixed intervals on the virtual clock.

    Attributes:
        engine: The PromQL engine over the scraped series.
        interval: Seconds between evaluations.
    """

    engine: PromQLEngine
    interval: float
    active: dict[tuple[str, LabelKey], _Active] = field(default_factory=dict)
    intervals: list[AlertInterval] = field(default_factory=list)
    open: dict[tuple[str, LabelKey], int] = field(default_factory=dict)
    last: float | None = None
    errors: dict[str, str] = field(default_factory=dict)
    _rules_key: str = ""
    _rules: list[AlertRule] = field(default_factory=list)

    def rules(self, manifests: list[Obj]) -> list[AlertRule]:
        """The alerting rules of the PrometheusRule objects (cached by resourceVersion)."""
        key = "|".join(
            f"{m['metadata']['name']}@{m['metadata'].get('resourceVersion')}" for m in manifests
        )
        if key != self._rules_key:
            rules: list[AlertRule] = []
            for m in manifests:
                try:
                    rules.extend(rules_from_manifest(m))
                except ValueError as exc:
                    self.errors[m["metadata"]["name"]] = str(exc)
            self._rules, self._rules_key = rules, key
        return self._rules

    def catch_up(self, now: float, start: float, manifests: list[Obj]) -> None:
        """Run every evaluation due in (last, now] on the evaluation grid anchored at start."""
        rules = self.rules(manifests)
        t = start if self.last is None else self.last + self.interval
        while t <= now + 1e-9:
            self._evaluate(rules, t)
            self.last = t
            t += self.interval

    def _evaluate(self, rules: list[AlertRule], t: float) -> None:
        seen: set[tuple[str, LabelKey]] = set()
        for rule in rules:
            try:
                result = self.engine.instant_vector(rule.expr, t)
            except PromQLError as exc:
                self.errors[rule.name] = str(exc)
                log.warning("alert rule %s failed: %s", rule.name, exc)
                continue
            for labels, value in result:
                base = {k: v for k, v in labels.items() if k != "__name__"}
                extra = {k: render_template(v, base, value) for k, v in rule.labels.items()}
                full = {**base, **extra, "alertname": rule.name}
                key = (rule.name, tuple(sorted(full.items())))
                if key in seen:
                    continue
                seen.add(key)
                notes = {k: render_template(v, base, value) for k, v in rule.annotations.items()}
                entry = self.active.get(key)
                if entry is None:
                    entry = _Active(full, notes, t, value)
                    self.active[key] = entry
                entry.value, entry.annotations = value, notes
                if entry.fired_at is None and t - entry.active_at >= rule.for_seconds:
                    entry.fired_at = t
                    self.open[key] = len(self.intervals)
                    self.intervals.append(
                        AlertInterval(alertname=rule.name, labels=full, start=_dt(t))
                    )
        for key in [k for k in self.active if k not in seen]:
            entry = self.active.pop(key)
            if entry.fired_at is not None and key in self.open:
                i = self.open.pop(key)
                self.intervals[i] = self.intervals[i].model_copy(update={"end": _dt(t)})

    def alerts(self) -> list[Alert]:
        """Active alerts (pending and firing), sorted by name and labels."""
        out = []
        for (name, labels), entry in sorted(self.active.items()):
            out.append(
                Alert(
                    alertname=name,
                    labels=dict(labels),
                    annotations=entry.annotations,
                    state=AlertState.FIRING if entry.fired_at is not None else AlertState.PENDING,
                    active_at=_dt(entry.active_at),
                    value=entry.value,
                )
            )
        return out

    def history(self) -> list[AlertInterval]:
        """Every firing interval so far, in the order they started."""
        return list(self.intervals)


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)
