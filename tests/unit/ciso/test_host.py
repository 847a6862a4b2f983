"""The modelled RHEL9 host: files and command answers rendered from one state agree."""

from __future__ import annotations

from itbench.core.ciso import host
from itbench.core.ciso.settings import SETTINGS, State, setting_changes


def _patched(setting_id: str, state: State) -> host.HostState:
    (change,) = setting_changes(SETTINGS[setting_id], state, "")
    return host.apply_patch(host.baseline_state(), change.body)


def test_sshd_file_and_effective_configuration_agree() -> None:
    state = _patched("sshd-root-login", State.NONCOMPLIANT)
    text = host.render_files(state)["/etc/ssh/sshd_config"].content
    assert "PermitRootLogin yes" in text
    answer = host.command_answer(state, ["/usr/sbin/sshd", "-T"])
    assert "permitrootlogin yes\n" in answer.stdout
    assert answer.status == 0


def test_a_drop_in_wins_over_the_main_file() -> None:
    state = _patched("sshd-root-login-dropin", State.NONCOMPLIANT)
    assert "PermitRootLogin no" in host.render_files(state)["/etc/ssh/sshd_config"].content
    assert "permitrootlogin yes\n" in host.command_answer(state, ["sshd", "-T"]).stdout
    good = _patched("sshd-root-login-dropin", State.COMPLIANT)
    assert "permitrootlogin no\n" in host.command_answer(good, ["sshd", "-T"]).stdout


def test_file_modes_services_and_packages_follow_the_state() -> None:
    bad = _patched("shadow-permissions", State.NONCOMPLIANT)
    assert host.render_files(bad)["/etc/shadow"].mode == "0644"
    assert host.render_files(host.baseline_state())["/etc/shadow"].mode == "0000"
    off = _patched("auditd-service", State.NONCOMPLIANT)
    answer = host.command_answer(off, ["systemctl", "is-active", "auditd"])
    assert (answer.stdout, answer.status) == ("inactive\n", 1)
    telnet = _patched("telnet-server", State.NONCOMPLIANT)
    assert host.command_answer(telnet, ["rpm", "-q", "telnet-server"]).status == 0
    absent = host.command_answer(host.baseline_state(), ["rpm", "-q", "telnet-server"])
    assert (absent.stdout, absent.status) == ("package telnet-server is not installed\n", 1)


def test_commands_that_would_change_the_host_are_refused() -> None:
    state = host.baseline_state()
    for argv in (
        ["systemctl", "stop", "auditd"],
        ["sysctl", "-w", "net.ipv4.ip_forward=1"],
        ["sysctl", "net.ipv4.ip_forward=1"],
        ["rpm", "-e", "audit"],
    ):
        answer = host.command_answer(state, argv)
        assert answer.status == 77, argv
        assert "read-only" in answer.stderr


def test_merge_patch_null_deletes_and_leaves_the_input_alone() -> None:
    base = host.baseline_state()
    patched = host.apply_patch(base, {"packages": {"audit": None}, "sshd": {"MaxAuthTries": "3"}})
    assert "audit" not in patched["packages"]
    assert patched["sshd"]["MaxAuthTries"] == "3"
    assert base["packages"]["audit"] and base["sshd"]["MaxAuthTries"] == "4"
