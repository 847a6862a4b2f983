"""The scoring core: pure graders of one trial and metrics over many, under a named profile."""

from itbench.core.scoring.aggregate import build_report, headline
from itbench.core.scoring.ciso import score_posture
from itbench.core.scoring.diagnosis import score_diagnosis
from itbench.core.scoring.finops import proximity, score_finops
from itbench.core.scoring.mitigation import MitigationEvidence, score_mitigation
from itbench.core.scoring.ntam import fl_ntam, fpc_ntam, ntam
from itbench.core.scoring.passk import pass_at_k, pass_at_k_float
from itbench.core.scoring.profile import (
    DEFAULT_PROFILE,
    EvaluationProfile,
    UnknownProfileError,
    get_profile,
)
from itbench.core.scoring.timing import mean_time, time_to

__all__ = [
    "DEFAULT_PROFILE",
    "EvaluationProfile",
    "MitigationEvidence",
    "UnknownProfileError",
    "build_report",
    "fl_ntam",
    "fpc_ntam",
    "get_profile",
    "headline",
    "mean_time",
    "ntam",
    "pass_at_k",
    "pass_at_k_float",
    "proximity",
    "score_diagnosis",
    "score_finops",
    "score_mitigation",
    "score_posture",
    "time_to",
]
