"""The heuristic SRE agent's playbook pieces: template restoration patches and flag ownership."""

from __future__ import annotations

from typing import Any

from agents.heuristic_sre.agent import _flag_service, restore_patch

SERVICES = ["ad", "cart", "checkout", "frontend", "image-provider", "payment", "product-catalog"]


def _template(image: str, env: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "checkout"}},
        "spec": {
            "containers": [
                {
                    "name": "checkout",
                    "image": image,
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                }
            ],
            **spec,
        },
    }


def test_restore_patch_reverts_values_and_nulls_added_keys() -> None:
    first = _template("demo:2.0.2", {"PAYMENT_ADDR": "payment:8080"})
    broken = _template("demo:broken", {"PAYMENT_ADDR": "nowhere:1"}, nodeSelector={"disk": "none"})
    patch = restore_patch(broken, first)
    assert patch == {
        "spec": {
            "containers": [
                {
                    "name": "checkout",
                    "image": "demo:2.0.2",
                    "env": [{"name": "PAYMENT_ADDR", "value": "payment:8080"}],
                }
            ],
            "nodeSelector": None,
        }
    }


def test_restore_patch_deletes_named_items_the_first_revision_lacks() -> None:
    first = _template("demo:1", {"A": "1"})
    broken = _template("demo:1", {"A": "1", "B": "2"})
    patch = restore_patch(broken, first)
    env = patch["spec"]["containers"][0]["env"]
    assert {"name": "B", "$patch": "delete"} in env
    assert restore_patch(first, first) == {}


def test_flags_belong_to_the_service_their_name_starts_with() -> None:
    assert _flag_service("productCatalogFailure", SERVICES) == "product-catalog"
    assert _flag_service("paymentUnreachable", SERVICES) == "payment"
    assert _flag_service("adHighCpu", SERVICES) == "ad"
    assert _flag_service("imageSlowLoad", SERVICES) == "image-provider"
    assert _flag_service("kafkaQueueProblems", SERVICES) is None
