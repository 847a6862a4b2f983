"""What a report measures: each task and how a trial's scores decide it, the end-to-end
resolution rate of each persona, the mean scores and times, and the breakdown dimensions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from itbench.core.models.base import Domain
from itbench.core.models.report import TrialRecord
from itbench.core.models.trial import TrialScores
from itbench.core.tasks import (
    CISO_POSTURE,
    FINOPS_DIAGNOSIS,
    FINOPS_FALSE_ALARM,
    FINOPS_MITIGATION,
    SRE_DIAGNOSIS,
    SRE_FALSE_ALARM,
    SRE_MITIGATION,
)

ScenarioKey = tuple[str, bool]
"""Scenarios are grouped by name and traces on/off (the ablation runs the same name twice)."""


@dataclass(frozen=True)
class TaskDefinition:
    """A pass/fail task of one persona and how a trial's scores decide it."""

    key: str
    domain: Domain
    name: str
    measures: str
    outcome: Callable[[TrialScores], bool]
    explain: Callable[[TrialScores], str] = lambda _s: ""
    """The text of the task's verdict (`Check: detail; ...`), whose first check names why a
    trial did not pass it; empty where the task records none."""

    def label(self, k: int) -> str:
        """The label of pass@k of this task, naming exactly what passes."""
        return f"{self.name} pass@{k} ({self.measures})"


def _diagnosis(s: TrialScores) -> bool:
    return s.diagnosis is not None and s.diagnosis.passed


def _mitigation(s: TrialScores) -> bool:
    return s.mitigation is not None and s.mitigation.passed


def _posture(s: TrialScores) -> bool:
    return s.posture is not None and s.posture.passed


def _finops_diagnosis(s: TrialScores) -> bool:
    return s.finops is not None and s.finops.diagnosis_passed


def _finops_mitigation(s: TrialScores) -> bool:
    return s.finops is not None and s.finops.mitigation_passed


def _sre_false_alarm(s: TrialScores) -> bool:
    if s.false_alarm is not None:
        return s.false_alarm.passed
    # Scored before the check had its own score: a control's diagnosis passes only when no
    # root cause is named, its mitigation only when nothing fired and health stayed at baseline.
    return _diagnosis(s) and (s.mitigation is None or s.mitigation.passed) and not s.collateral


def _diagnosis_reason(s: TrialScores) -> str:
    return s.diagnosis.reason if s.diagnosis is not None else ""


def _mitigation_reason(s: TrialScores) -> str:
    return s.mitigation.reason if s.mitigation is not None else ""


def _posture_reason(s: TrialScores) -> str:
    return s.posture.reason if s.posture is not None else ""


def _false_alarm_reason(s: TrialScores) -> str:
    return s.false_alarm.reason if s.false_alarm is not None else ""


def _finops_false_alarm(s: TrialScores) -> bool:
    if s.false_alarm is not None:
        return s.false_alarm.passed
    return _finops_diagnosis(s) and _finops_mitigation(s) and not s.collateral


TASKS: tuple[TaskDefinition, ...] = (
    TaskDefinition(
        SRE_DIAGNOSIS,
        Domain.SRE,
        "SRE diagnosis",
        "root cause named",
        _diagnosis,
        _diagnosis_reason,
    ),
    TaskDefinition(
        SRE_MITIGATION,
        Domain.SRE,
        "SRE mitigation",
        "alerts cleared, health at baseline",
        _mitigation,
        _mitigation_reason,
    ),
    TaskDefinition(
        SRE_FALSE_ALARM,
        Domain.SRE,
        "SRE false alarm",
        "no-fault control: no root cause named, nothing changed",
        _sre_false_alarm,
        _false_alarm_reason,
    ),
    TaskDefinition(
        CISO_POSTURE,
        Domain.CISO,
        "CISO posture assessment",
        "every target's posture right on the trial's variant and its counterpart",
        _posture,
        _posture_reason,
    ),
    TaskDefinition(
        FINOPS_DIAGNOSIS,
        Domain.FINOPS,
        "FinOps diagnosis",
        "inefficiency identified",
        _finops_diagnosis,
    ),
    TaskDefinition(
        FINOPS_MITIGATION,
        Domain.FINOPS,
        "FinOps mitigation",
        "inefficiency removed, alerts cleared",
        _finops_mitigation,
    ),
    TaskDefinition(
        FINOPS_FALSE_ALARM,
        Domain.FINOPS,
        "FinOps false alarm",
        "no-fault control: no inefficiency named, nothing changed",
        _finops_false_alarm,
        _false_alarm_reason,
    ),
)
"""Every task, in report order."""

TASKS_BY_KEY: dict[str, TaskDefinition] = {t.key: t for t in TASKS}
"""Every task by key."""

RESOLUTION: dict[Domain, tuple[str, tuple[str, ...]]] = {
    Domain.SRE: (
        "SRE end-to-end resolution rate (diagnosis and mitigation both passed in the same trial; "
        "scenarios with both tasks)",
        (SRE_DIAGNOSIS, SRE_MITIGATION),
    ),
    Domain.CISO: (
        "CISO end-to-end resolution rate (posture assessment passed)",
        (CISO_POSTURE,),
    ),
    Domain.FINOPS: (
        "FinOps end-to-end resolution rate (diagnosis and mitigation both passed in the same "
        "trial; scenarios with both tasks)",
        (FINOPS_DIAGNOSIS, FINOPS_MITIGATION),
    ),
}
"""One consistent definition of 'resolved' per persona: every listed task passed in one trial,
over the trials scored on all of them."""


def _fl(s: TrialScores | None) -> float:
    return s.diagnosis.fl_ntam if s and s.diagnosis else 0.0


def _fpc(s: TrialScores | None) -> float:
    return s.diagnosis.fpc_ntam if s and s.diagnosis else 0.0


def _proximity(field: str) -> Callable[[TrialScores | None], float]:
    def value(s: TrialScores | None) -> float:
        return float(getattr(s.finops, field)) if s and s.finops else 0.0

    return value


MEANS: tuple[tuple[str, str, str, Callable[[TrialScores | None], float]], ...] = (
    (
        "sre.fl_ntam",
        "SRE fault-localization NTAM (root-cause entities; 1 = perfect)",
        SRE_DIAGNOSIS,
        _fl,
    ),
    (
        "sre.fpc_ntam",
        "SRE fault-propagation-chain NTAM (every chain entity; 1 = perfect)",
        SRE_DIAGNOSIS,
        _fpc,
    ),
    (
        "finops.cost_proximity",
        "FinOps proximity to optimal cost (1 = optimal)",
        FINOPS_MITIGATION,
        _proximity("cost_proximity"),
    ),
    (
        "finops.cpu_proximity",
        "FinOps proximity to optimal CPU requests (1 = optimal)",
        FINOPS_MITIGATION,
        _proximity("cpu_proximity"),
    ),
    (
        "finops.memory_proximity",
        "FinOps proximity to optimal memory requests (1 = optimal)",
        FINOPS_MITIGATION,
        _proximity("memory_proximity"),
    ),
    (
        "finops.efficiency_proximity",
        "FinOps proximity to optimal CPU efficiency, usage / requests (1 = optimal)",
        FINOPS_MITIGATION,
        _proximity("efficiency_proximity"),
    ),
)
"""Mean scores: key, label, the task whose trials they are over, per-trial value (0 for a
trial without that score)."""


def _ttd(s: TrialScores | None) -> float | None:
    return s.diagnosis.ttd_seconds if s and s.diagnosis and s.diagnosis.passed else None


def _ttr(s: TrialScores | None) -> float | None:
    return s.mitigation.ttr_seconds if s and s.mitigation and s.mitigation.passed else None


def _ttp(s: TrialScores | None) -> float | None:
    return s.posture.ttp_seconds if s and s.posture and s.posture.passed else None


TIMINGS: tuple[tuple[str, str, str, Callable[[TrialScores | None], float | None]], ...] = (
    (
        "sre.mttd",
        "SRE mean time to diagnosis, seconds (correct diagnoses only)",
        SRE_DIAGNOSIS,
        _ttd,
    ),
    (
        "sre.mttr",
        "SRE mean time to repair, seconds (passed mitigations only)",
        SRE_MITIGATION,
        _ttr,
    ),
    (
        "ciso.ttp",
        "CISO mean time to process, seconds from Ready to the accepted artefacts (passed "
        "posture assessments only)",
        CISO_POSTURE,
        _ttp,
    ),
)
"""Mean times over successful trials: key, label, the task whose trials they are over, per-trial
time (None if no success)."""


BREAKDOWN_DIMENSIONS: tuple[tuple[str, Callable[[TrialRecord], str]], ...] = (
    ("domain", lambda r: r.domain.value),
    ("class", lambda r: r.scenario_class),
    ("complexity", lambda r: r.complexity.value if r.complexity else "Unknown"),
    ("traces", lambda r: "traces-on" if r.traces_enabled else "traces-off"),
)
"""What the trials are sliced by, and each trial's slice."""
