"""The CISO misconfigurations as faults of the library: a setting configured one way or the
other (`ciso.setting`), the installed policy set of the update scenarios (`ciso.policy-set`), and
the other CIS weaknesses of the trial's environment (`ciso.background`).

A CISO scenario's variants differ only in the `state` argument of its `ciso.setting` faults
(`compliant` or `noncompliant`): the counterpart of an instance flips it (see
`itbench.core.ciso.posture.counterpart`); its background weaknesses are the same in both.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from itbench.core.ciso.background import BACKGROUND_DRAWS, background_weaknesses
from itbench.core.ciso.namespace import WORKLOAD_NAMES
from itbench.core.ciso.policies import POLICY_SETS
from itbench.core.ciso.settings import SETTINGS, Scope, State, setting, setting_changes
from itbench.core.faults import FaultArgs, FaultDefinition, Mechanism, ObjectChange, register

SETTING_FAULT = "ciso.setting"
POLICY_SET_FAULT = "ciso.policy-set"
BACKGROUND_FAULT = "ciso.background"


class SettingArgs(FaultArgs):
    """Which setting, which way, and (for workload settings) on which Deployment."""

    setting: str = Field(description="The setting id (see itbench.core.ciso.settings).")
    state: Literal["compliant", "noncompliant"] = Field(description="Which way to set it.")
    workload: str = Field(default="", description="The Deployment, for workload settings.")

    @field_validator("setting")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in SETTINGS:
            raise ValueError(f"unknown setting {value!r} (known: {', '.join(sorted(SETTINGS))})")
        return value

    @model_validator(mode="after")
    def _workload(self) -> SettingArgs:
        scope = SETTINGS[self.setting].scope
        if scope == Scope.WORKLOAD and self.workload not in WORKLOAD_NAMES:
            raise ValueError(
                f"workload: {self.setting} needs a Deployment of the namespace "
                f"({', '.join(WORKLOAD_NAMES)}), got {self.workload!r}"
            )
        if scope != Scope.WORKLOAD and self.workload:
            raise ValueError(f"workload: {self.setting} is not a workload setting")
        return self


class PolicySetArgs(FaultArgs):
    """The installed policy set, and the policy the scenario's new requirement concerns."""

    set: str = Field(description="The policy set id (see itbench.core.ciso.policies).")
    update: str = Field(description="The name of the policy the requirement concerns.")

    @model_validator(mode="after")
    def _known(self) -> PolicySetArgs:
        if self.set not in POLICY_SETS:
            raise ValueError(
                f"set: unknown policy set {self.set!r} (known: {', '.join(POLICY_SETS)})"
            )
        names = [str(p["metadata"]["name"]) for p in POLICY_SETS[self.set]]
        if self.update not in names:
            raise ValueError(
                f"update: {self.update!r} is not a policy of {self.set} ({', '.join(names)})"
            )
        return self


class BackgroundArgs(FaultArgs):
    """Which background draw, around which assessed setting (see `itbench.core.ciso.background`)."""

    setting: str = Field(description="The assessed setting (its weakness is never drawn).")
    workload: str = Field(default="", description="The assessed Deployment, for workload settings.")
    draw: int = Field(ge=0, lt=BACKGROUND_DRAWS, description="The background parameter's value.")
    set: str = Field(
        default="",
        description="The policy set an update scenario installs ('' when none): what it "
        "refuses is never drawn.",
    )

    @field_validator("setting")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in SETTINGS:
            raise ValueError(f"unknown setting {value!r} (known: {', '.join(sorted(SETTINGS))})")
        return value

    @field_validator("set")
    @classmethod
    def _known_set(cls, value: str) -> str:
        if value and value not in POLICY_SETS:
            raise ValueError(f"unknown policy set {value!r} (known: {', '.join(POLICY_SETS)})")
        return value


def _background(args: BackgroundArgs, _namespace: str) -> list[ObjectChange]:
    out: list[ObjectChange] = []
    for weakness, workload in background_weaknesses(
        args.setting, args.workload, args.draw, update=bool(args.set)
    ):
        out += setting_changes(setting(weakness), State.NONCOMPLIANT, workload)
    return out


def _setting(args: SettingArgs, _namespace: str) -> list[ObjectChange]:
    return setting_changes(setting(args.setting), State(args.state), args.workload)


def _policy_set(args: PolicySetArgs, _namespace: str) -> list[ObjectChange]:
    return [
        ObjectChange(
            op="create",
            api_version=str(p["apiVersion"]),
            kind=str(p["kind"]),
            name=str(p["metadata"]["name"]),
            body=p,
        )
        for p in POLICY_SETS[args.set]
    ]


register(
    FaultDefinition(
        id=SETTING_FAULT,
        description="A CIS-relevant setting of the namespace or the RHEL9 host, configured "
        "compliantly or not (a CISO scenario's variant).",
        mechanism=Mechanism.KUBERNETES,
        args_model=SettingArgs,
        effect=_setting,
        playbook="faults/object-patch.yaml",
    )
)
register(
    FaultDefinition(
        id=BACKGROUND_FAULT,
        description="Other CIS weaknesses of the namespace or the RHEL9 host than the assessed "
        "setting, the same in both variants of a CISO scenario.",
        mechanism=Mechanism.KUBERNETES,
        args_model=BackgroundArgs,
        effect=_background,
        playbook="faults/object-patch.yaml",
    )
)
register(
    FaultDefinition(
        id=POLICY_SET_FAULT,
        description="The Kyverno policy set installed before an update scenario's new requirement.",
        mechanism=Mechanism.KUBERNETES,
        args_model=PolicySetArgs,
        effect=_policy_set,
        playbook="faults/object-create.yaml",
    )
)
