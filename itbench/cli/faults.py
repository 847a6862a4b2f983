"""`itbench faults list|show|inject|remove`: the fault library, each fault's argument schema, and
injecting a fault into a live cluster (and removing it again) with the fault playbooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import yaml
from pydantic import ValidationError

from itbench.cli.context import BadInput, OutputFormat, dump, output_option, print_rows
from itbench.core.faults import FaultDefinition, UnknownFaultError, all_faults, get_fault


def fault_row(fault: FaultDefinition) -> dict[str, Any]:
    """A fault as JSON-compatible data, with its arguments' JSON schema."""
    schema = fault.args_model.model_json_schema()
    return {
        "id": fault.id,
        "mechanism": fault.mechanism.value,
        "description": fault.description,
        "playbook": fault.playbook,
        "args": sorted(schema.get("properties", {})),
        "argsSchema": schema,
    }


@click.group("faults")
def faults() -> None:
    """The fault library: list, show, and inject into or remove from a live cluster."""


@faults.command("list")
@output_option()
def list_faults(output: str) -> None:
    """List every fault id with its mechanism and description."""
    rows = [fault_row(f) for f in all_faults()]
    print_rows(
        rows,
        (
            ("id", "ID"),
            ("mechanism", "MECHANISM"),
            ("args", "ARGS"),
            ("description", "DESCRIPTION"),
        ),
        output,
        title=f"{len(rows)} faults",
    )


@faults.command("show")
@click.argument("fault_id")
@output_option(default=OutputFormat.YAML)
def show_fault(fault_id: str, output: str) -> None:
    """Show one fault and the JSON schema its arguments must satisfy."""
    try:
        fault = get_fault(fault_id)
    except UnknownFaultError:
        known = ", ".join(f.id for f in all_faults())
        raise BadInput(f"unknown fault id {fault_id!r}; known: {known}") from None
    row = fault_row(fault)
    if OutputFormat(output) == OutputFormat.TABLE:
        click.echo(f"{row['id']} ({row['mechanism']}): {row['description']}")
        click.echo(f"playbook: {row['playbook']}")
        click.echo("arguments (JSON schema):")
        click.echo(dump(row["argsSchema"], OutputFormat.YAML), nl=False)
    else:
        click.echo(dump(row, output), nl=False)


def _parse_args(pairs: tuple[str, ...], args_file: Path | None) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if args_file is not None:
        loaded = yaml.safe_load(args_file.read_text(encoding="utf-8"))
        if loaded is not None and not isinstance(loaded, dict):
            raise BadInput(f"{args_file}: fault arguments must be a mapping")
        args.update(loaded or {})
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BadInput(f"--arg {pair!r}: expected NAME=VALUE")
        args[key] = yaml.safe_load(value) if value else ""
    return args


def _cluster_faults(kubeconfig: str | None, collections_path: str | None) -> Any:
    from kubernetes import config

    from itbench.environments.kube.faults import (
        AnsiblePlaybookRunner,
        ClusterFaults,
        KubeObjectReader,
    )

    if kubeconfig is None:
        try:
            client = config.new_client_from_config()
        except config.ConfigException:
            config.load_incluster_config()
            from kubernetes.client import ApiClient

            client = ApiClient()
    else:
        client = config.new_client_from_config(config_file=kubeconfig)
    runner = AnsiblePlaybookRunner(kubeconfig=kubeconfig, collections_path=collections_path)
    return ClusterFaults(reader=KubeObjectReader(client), runner=runner)


_KUBECONFIG = click.option(
    "--kubeconfig",
    envvar="KUBECONFIG",
    default=None,
    help="Kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster).",
)
_COLLECTIONS = click.option(
    "--collections-path",
    envvar="ANSIBLE_COLLECTIONS_PATH",
    default=None,
    help="Where the kubernetes.core collection is installed (default: Ansible's search path).",
)


@faults.command("inject")
@click.argument("fault_id")
@click.option("--arg", "pairs", multiple=True, help="A fault argument NAME=VALUE (repeat).")
@click.option(
    "--args-file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="Fault arguments as a YAML mapping (--arg values override it).",
)
@click.option(
    "--namespace", "-n", default="otel-demo", show_default=True, help="The application's namespace."
)
@click.option(
    "--record",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="Where to write what `itbench faults remove` needs to undo the injection.",
)
@_KUBECONFIG
@_COLLECTIONS
def inject(
    fault_id: str,
    pairs: tuple[str, ...],
    args_file: Path | None,
    namespace: str,
    record: Path,
    kubeconfig: str | None,
    collections_path: str | None,
) -> None:
    """Inject a fault into a live cluster with its playbook.

    The arguments are validated against the fault's schema first (see `itbench faults show`);
    nothing is changed when they are invalid. If a change fails, the ones before it are undone.
    """
    from itbench.environments.port import EnvironmentFailure

    try:
        fault = get_fault(fault_id)
    except UnknownFaultError:
        known = ", ".join(f.id for f in all_faults())
        raise BadInput(f"unknown fault id {fault_id!r}; known: {known}") from None
    if record.exists():
        raise BadInput(f"--record {record} exists: remove that injection first, or pick a new file")
    args = _parse_args(pairs, args_file)
    try:
        changes = fault.changes(args, namespace)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
            for e in exc.errors()
        )
        raise BadInput(f"fault {fault_id}: invalid arguments: {problems}") from None
    try:
        applied = _cluster_faults(kubeconfig, collections_path).inject(changes)
    except EnvironmentFailure as exc:
        raise click.ClickException(str(exc)) from None
    document = {"fault": fault_id, "namespace": namespace, "applied": [a.wire() for a in applied]}
    record.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    click.echo(
        f"injected {fault_id} ({len(applied)} change(s)); "
        f"to remove it: itbench faults remove --record {record}"
    )


@faults.command("remove")
@click.option(
    "--record",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    required=True,
    help="The file `itbench faults inject` wrote.",
)
@_KUBECONFIG
@_COLLECTIONS
def remove(record: Path, kubeconfig: str | None, collections_path: str | None) -> None:
    """Remove an injected fault: put back every object it changed, then delete the record."""
    from itbench.environments.kube.faults import AppliedChange
    from itbench.environments.port import EnvironmentFailure

    try:
        document = json.loads(record.read_text(encoding="utf-8"))
        applied = [AppliedChange.from_wire(a) for a in document["applied"]]
    except (json.JSONDecodeError, KeyError, TypeError, ValidationError) as exc:
        raise BadInput(
            f"--record {record} is not a record of `itbench faults inject`: {exc}"
        ) from None
    try:
        _cluster_faults(kubeconfig, collections_path).remove(applied)
    except EnvironmentFailure as exc:
        raise click.ClickException(f"{exc} (the record is kept; retry the removal)") from None
    record.unlink()
    click.echo(f"removed {document.get('fault', 'the fault')} ({len(applied)} change(s))")
