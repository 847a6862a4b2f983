"""The RHEL9 host of a CISO trial (its files and its read-only commands) and the evidence
sandbox, where an agent tries a collection against the trial's environment before submitting."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from itbench.core.ciso import host as host_model
from itbench.core.models.base import Domain
from itbench.core.models.compliance import EvidenceCollection
from itbench.gateway.errors import BadInputError, FieldError, NotFoundError, bounded
from itbench.gateway.operations.calls import Origin, audited
from itbench.gateway.operations.payloads import Payload, validate
from itbench.gateway.schemas import CollectionRun, HostAnswer, HostCommand, HostFile, HostFiles
from itbench.gateway.sessions import TrialSession

MAX_PATH = 4096


@runtime_checkable
class ComplianceView(Protocol):
    """What the host and collection calls read of a CISO trial's environment: the compliance
    twin, or a cluster trial's workspace (`itbench.ciso.workspace.WorkspaceEnvironment`, whose
    objects read as if in the scenario's namespace)."""

    def objects(self) -> list[dict[str, Any]]:
        """Every object a collection's kubectl reads."""
        ...

    def host_state(self) -> host_model.HostState:
        """The RHEL9 host's state."""
        ...


def _twin(session: TrialSession) -> ComplianceView:
    env = session.env
    if session.scenario.spec.domain != Domain.CISO or not isinstance(env, ComplianceView):
        raise NotFoundError(
            "no-host",
            "No host",
            "this trial has no RHEL9 host: only CISO trials have one",
        )
    return env


def host_files(session: TrialSession, origin: Origin, path: str | None = None) -> HostFiles:
    """Every modelled file of the host (path, mode, owners), or one file with its text.

    Raises:
        NotFoundError: Not a CISO trial, or no such file.
    """
    with audited(session, origin, "observe.host.files", session.virtual_cost.observation) as call:
        call.detail["path"] = (path or "")[:MAX_PATH]
        state = _twin(session).host_state()
        files = host_model.render_files(state)
        name = str(state.get("hostname", host_model.HOSTNAME))
        if path:
            found = files.get(path)
            if found is None:
                raise NotFoundError(
                    "file-not-found",
                    "Not found",
                    bounded(f"{path}: no such file on {name}"),
                    extra={"path": path[:MAX_PATH]},
                )
            return HostFiles(
                host=name,
                files=[
                    HostFile(
                        path=path,
                        mode=found.mode,
                        owner=found.owner,
                        group=found.group,
                        content=found.content,
                    )
                ],
            )
        return HostFiles(
            host=name,
            files=[
                HostFile(path=p, mode=f.mode, owner=f.owner, group=f.group)
                for p, f in sorted(files.items())
            ],
        )


def host_command(session: TrialSession, origin: Origin, body: HostCommand | Payload) -> HostAnswer:
    """Run one of the host's read-only commands; one that would change the host is refused.

    Raises:
        InvalidError: The body does not validate.
        BadInputError: The command is not one the host answers.
        NotFoundError: Not a CISO trial.
    """
    with audited(session, origin, "observe.host.command", session.virtual_cost.observation) as call:
        parsed = validate(HostCommand, body, call)
        call.detail["argv"] = [a[:200] for a in parsed.argv[:16]]
        state = _twin(session).host_state()
        command = parsed.argv[0].rsplit("/", 1)[-1]
        if command not in host_model.HOST_COMMANDS:
            raise BadInputError(
                "unknown-command",
                "Unknown command",
                bounded(
                    f"argv[0]: the host answers {', '.join(host_model.HOST_COMMANDS)}; read "
                    "files with the host files API"
                ),
                errors=[FieldError(field="argv[0]", message=f"{command!r} is not answered")],
            )
        answer = host_model.command_answer(state, list(parsed.argv))
        if answer.status == 77:
            call.outcome = "refused"
        return HostAnswer(
            argv=list(parsed.argv), stdout=answer.stdout, stderr=answer.stderr, status=answer.status
        )


def try_collection(
    session: TrialSession, origin: Origin, body: EvidenceCollection | Payload
) -> CollectionRun:
    """Run a collection in the evidence sandbox against a read-only copy of the trial's
    environment and answer what it produced (the submission's evaluation runs it again). On a
    cluster trial of the RHEL9 class it runs as the evaluation does, in an evidence Pod on the
    trial's cluster over the trial's host.

    Raises:
        InvalidError: The body does not validate.
        NotFoundError: Not a CISO trial.
    """
    from itbench.ciso.host_pod import collect_on
    from itbench.ciso.sandbox import EnvironmentView, run_collection

    with audited(session, origin, "observe.collect", session.virtual_cost.observation) as call:
        parsed = validate(EvidenceCollection, body, call)
        result = collect_on(session.env, session.scenario, parsed)
        call.detail["onCluster"] = result is not None
        if result is None:
            env = _twin(session)
            namespace = session.scenario.spec.environment.namespace
            view = EnvironmentView(namespace, env.objects(), env.host_state())
            result = run_collection(parsed, view)
        call.detail["ok"] = result.ok
        if not result.ok:
            call.outcome = "error"
        return CollectionRun.model_validate(result.summary())
