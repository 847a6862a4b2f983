"""Which tasks a scenario is scored on."""

from __future__ import annotations

from pathlib import Path

from itbench.catalog_files import load_catalog
from itbench.core.catalog import Catalog
from itbench.core.tasks import (
    FINOPS_FALSE_ALARM,
    SRE_DIAGNOSIS,
    SRE_FALSE_ALARM,
    SRE_MITIGATION,
    tasks_for,
)


def _catalog() -> Catalog:
    catalog, problems = load_catalog(Path(__file__).parents[2] / "scenarios")
    assert not problems
    return catalog


def test_controls_have_only_the_false_alarm_task() -> None:
    catalog = _catalog()
    assert tasks_for(catalog.get("no-fault-control")) == [SRE_FALSE_ALARM]
    assert tasks_for(catalog.get("finops-no-fault-control")) == [FINOPS_FALSE_ALARM]


def test_injector_side_faults_are_scored_on_diagnosis_only() -> None:
    catalog = _catalog()
    assert tasks_for(catalog.get("product-catalog-network-delay")) == [SRE_DIAGNOSIS]
    assert tasks_for(catalog.get("cart-flagd-failure")) == [SRE_DIAGNOSIS, SRE_MITIGATION]
