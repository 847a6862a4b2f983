"""The modelled RHEL9 host of the CISO scenarios: its state as data, and the files and command
answers rendered from it.

The state is what a CIS RHEL9 assessment reads: sshd options (main file and drop-ins), password
aging and quality, file modes and owners, systemd units, installed packages, sysctl values,
SELinux, audit rules, kernel-module blacklists and the crypto policy. A misconfiguration is a JSON
merge patch of the state (`apply_patch`); the files (`render_files`) and the commands
(`command_answer`) are both rendered from it, so `grep PermitRootLogin /etc/ssh/sshd_config`,
`sshd -T` and `stat /etc/shadow` always agree. The baseline passes every control the catalog
checks.
"""

from __future__ import annotations

import copy
import json
import shlex
from dataclasses import dataclass
from typing import Any

HostState = dict[str, Any]

HOSTNAME = "rhel9-01"
"""The host's name (targets are `Host/rhel9-01`)."""
HOST_TARGET = f"Host/{HOSTNAME}"


def baseline_state() -> HostState:
    """The hardened RHEL9 host."""
    return {
        "hostname": HOSTNAME,
        "release": {"name": "Red Hat Enterprise Linux", "version": "9.4", "codename": "Plow"},
        "kernel": "5.14.0-427.13.1.el9_4.x86_64",
        "sshd": {
            "LogLevel": "VERBOSE",
            "PermitRootLogin": "no",
            "MaxAuthTries": "4",
            "MaxSessions": "10",
            "MaxStartups": "10:30:60",
            "LoginGraceTime": "60",
            "PermitEmptyPasswords": "no",
            "PermitUserEnvironment": "no",
            "HostbasedAuthentication": "no",
            "IgnoreRhosts": "yes",
            "X11Forwarding": "no",
            "DisableForwarding": "yes",
            "ClientAliveInterval": "15",
            "ClientAliveCountMax": "3",
            "Banner": "/etc/issue.net",
            "UsePAM": "yes",
        },
        "sshdDropIns": {
            "50-redhat.conf": {
                "GSSAPIAuthentication": "yes",
                "ChallengeResponseAuthentication": "no",
                "PrintMotd": "no",
            }
        },
        "loginDefs": {
            "MAIL_DIR": "/var/spool/mail",
            "UMASK": "027",
            "PASS_MAX_DAYS": "365",
            "PASS_MIN_DAYS": "1",
            "PASS_WARN_AGE": "7",
            "UID_MIN": "1000",
            "UID_MAX": "60000",
            "ENCRYPT_METHOD": "SHA512",
            "USERGROUPS_ENAB": "yes",
            "CREATE_HOME": "yes",
        },
        "pwquality": {"minlen": "14", "minclass": "4", "maxrepeat": "3", "dictcheck": "1"},
        "files": {
            "/etc/passwd": {"mode": "0644", "owner": "root", "group": "root"},
            "/etc/passwd-": {"mode": "0644", "owner": "root", "group": "root"},
            "/etc/group": {"mode": "0644", "owner": "root", "group": "root"},
            "/etc/group-": {"mode": "0644", "owner": "root", "group": "root"},
            "/etc/shadow": {"mode": "0000", "owner": "root", "group": "root"},
            "/etc/shadow-": {"mode": "0000", "owner": "root", "group": "root"},
            "/etc/gshadow": {"mode": "0000", "owner": "root", "group": "root"},
            "/etc/ssh/sshd_config": {"mode": "0600", "owner": "root", "group": "root"},
            "/etc/crontab": {"mode": "0600", "owner": "root", "group": "root"},
            "/etc/login.defs": {"mode": "0644", "owner": "root", "group": "root"},
            "/etc/security/pwquality.conf": {"mode": "0644", "owner": "root", "group": "root"},
            "/etc/issue.net": {"mode": "0644", "owner": "root", "group": "root"},
        },
        "services": {
            "sshd": {"enabled": "enabled", "active": "active"},
            "auditd": {"enabled": "enabled", "active": "active"},
            "chronyd": {"enabled": "enabled", "active": "active"},
            "crond": {"enabled": "enabled", "active": "active"},
            "firewalld": {"enabled": "enabled", "active": "active"},
            "rsyslog": {"enabled": "enabled", "active": "active"},
            "avahi-daemon": {"enabled": "masked", "active": "inactive"},
            "cups": {"enabled": "masked", "active": "inactive"},
            "nfs-server": {"enabled": "disabled", "active": "inactive"},
            "kdump": {"enabled": "disabled", "active": "inactive"},
        },
        "packages": {
            "audit": "3.1.2-2.el9",
            "aide": "0.16-100.el9",
            "chrony": "4.5-1.el9",
            "crypto-policies": "20240202-1.git283706d.el9",
            "firewalld": "1.3.4-1.el9",
            "libpwquality": "1.4.4-8.el9",
            "openssh-server": "8.7p1-38.el9",
            "rsyslog": "8.2310.0-4.el9",
            "sudo": "1.9.5p2-10.el9_3",
            "systemd": "252-32.el9_4",
        },
        "sysctl": {
            "kernel.randomize_va_space": "2",
            "kernel.yama.ptrace_scope": "1",
            "net.ipv4.ip_forward": "0",
            "net.ipv4.conf.all.send_redirects": "0",
            "net.ipv4.conf.all.accept_redirects": "0",
            "net.ipv4.conf.all.accept_source_route": "0",
            "net.ipv4.conf.all.log_martians": "1",
            "net.ipv4.icmp_echo_ignore_broadcasts": "1",
            "net.ipv4.tcp_syncookies": "1",
            "net.ipv6.conf.all.accept_ra": "0",
        },
        "selinux": {"mode": "enforcing", "config": "enforcing", "policy": "targeted"},
        "cryptoPolicy": "DEFAULT",
        "auditRules": [
            "-w /etc/sudoers -p wa -k scope",
            "-w /etc/sudoers.d -p wa -k scope",
            "-w /etc/passwd -p wa -k identity",
            "-w /etc/shadow -p wa -k identity",
            "-w /etc/group -p wa -k identity",
            "-a always,exit -F arch=b64 -S sethostname,setdomainname -k system-locale",
            "-w /var/log/lastlog -p wa -k logins",
            "-e 2",
        ],
        "modprobe": {
            "cramfs": "install cramfs /bin/false",
            "freevxfs": "install freevxfs /bin/false",
            "hfs": "install hfs /bin/false",
            "squashfs": "install squashfs /bin/false",
            "udf": "install udf /bin/false",
            "usb-storage": "install usb-storage /bin/false",
        },
        "loadedModules": ["xfs", "nf_tables", "ip_tables", "overlay", "vfat"],
        "mounts": {
            "/": {"source": "/dev/mapper/rhel-root", "fstype": "xfs", "options": "rw,relatime"},
            "/tmp": {
                "source": "tmpfs",
                "fstype": "tmpfs",
                "options": "rw,nosuid,nodev,noexec,relatime",
            },
            "/dev/shm": {
                "source": "tmpfs",
                "fstype": "tmpfs",
                "options": "rw,nosuid,nodev,noexec",
            },
        },
    }


def apply_patch(state: Any, patch: Any) -> Any:
    """A JSON merge patch (RFC 7386) applied to a copy of the state (null deletes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: HostState = copy.deepcopy(state) if isinstance(state, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_patch(result.get(key), value)
    return result


# ---- files -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostFile:
    """One file of the host: its text, mode and owners."""

    content: str
    mode: str = "0644"
    owner: str = "root"
    group: str = "root"


_PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "bin:x:1:1:bin:/bin:/sbin/nologin\n"
    "daemon:x:2:2:daemon:/sbin:/sbin/nologin\n"
    "adm:x:3:4:adm:/var/adm:/sbin/nologin\n"
    "nobody:x:65534:65534:Kernel Overflow User:/:/sbin/nologin\n"
    "sshd:x:74:74:Privilege-separated SSH:/usr/share/empty.sshd:/sbin/nologin\n"
    "chrony:x:992:987:chrony system user:/var/lib/chrony:/sbin/nologin\n"
    "ops:x:1000:1000:Operations:/home/ops:/bin/bash\n"
)
_GROUP = (
    "root:x:0:\nbin:x:1:\ndaemon:x:2:\nadm:x:4:\nwheel:x:10:ops\nnobody:x:65534:\n"
    "sshd:x:74:\nchrony:x:987:\nops:x:1000:\n"
)
_SHADOW = (
    "root:!locked::0:99999:7:::\n"
    "bin:*:19700:0:99999:7:::\n"
    "daemon:*:19700:0:99999:7:::\n"
    "adm:*:19700:0:99999:7:::\n"
    "nobody:*:19700:0:99999:7:::\n"
    "sshd:!!:19700::::::\n"
    "chrony:!!:19700::::::\n"
    "ops:$6$rounds=656000$Qx1nZbTQ$redacted:19810:1:365:7:30::\n"
)
_GSHADOW = (
    "root:::\nbin:::\ndaemon:::\nadm:::\nwheel:::ops\nnobody:::\nsshd:!::\nchrony:!::\nops:!::\n"
)


def _key_values(values: dict[str, str], separator: str = " ") -> str:
    return "".join(f"{k}{separator}{v}\n" for k, v in values.items())


def _sshd_config(state: HostState) -> str:
    return (
        "# sshd server configuration, hardened to the CIS RHEL9 benchmark.\n"
        "# Drop-ins come first: for each keyword the first value sshd reads is the one it uses.\n"
        "Include /etc/ssh/sshd_config.d/*.conf\n\n"
        "HostKey /etc/ssh/ssh_host_rsa_key\n"
        "HostKey /etc/ssh/ssh_host_ecdsa_key\n"
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
        "SyslogFacility AUTHPRIV\n"
        "AuthorizedKeysFile .ssh/authorized_keys\n"
        "Subsystem sftp /usr/libexec/openssh/sftp-server\n\n" + _key_values(state["sshd"])
    )


def _release(state: HostState) -> dict[str, str]:
    release: dict[str, str] = state["release"]
    return release


def render_files(state: HostState) -> dict[str, HostFile]:
    """Every modelled file of the host by absolute path."""
    release = _release(state)
    version = release["version"]
    files: dict[str, str] = {
        "/etc/hostname": f"{state['hostname']}\n",
        "/etc/os-release": (
            f'NAME="{release["name"]}"\nVERSION="{version} ({release["codename"]})"\n'
            f'ID="rhel"\nID_LIKE="fedora"\nVERSION_ID="{version}"\nPLATFORM_ID="platform:el9"\n'
            f'PRETTY_NAME="{release["name"]} {version} ({release["codename"]})"\n'
            'ANSI_COLOR="0;31"\nCPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"\n'
        ),
        "/etc/redhat-release": f"{release['name']} release {version} ({release['codename']})\n",
        "/etc/passwd": _PASSWD,
        "/etc/passwd-": _PASSWD,
        "/etc/group": _GROUP,
        "/etc/group-": _GROUP,
        "/etc/shadow": _SHADOW,
        "/etc/shadow-": _SHADOW,
        "/etc/gshadow": _GSHADOW,
        "/etc/ssh/sshd_config": _sshd_config(state),
        "/etc/login.defs": "# Shadow password suite configuration.\n"
        + _key_values(state["loginDefs"]),
        "/etc/security/pwquality.conf": "# Password quality requirements (pam_pwquality).\n"
        + _key_values(state["pwquality"], " = "),
        "/etc/sysctl.d/60-cis.conf": _key_values(state["sysctl"], " = "),
        "/etc/selinux/config": (
            f"SELINUX={state['selinux']['config']}\nSELINUXTYPE={state['selinux']['policy']}\n"
        ),
        "/etc/crypto-policies/config": f"{state['cryptoPolicy']}\n",
        "/etc/audit/rules.d/50-cis.rules": "".join(f"{r}\n" for r in state["auditRules"]),
        "/etc/audit/auditd.conf": (
            "log_file = /var/log/audit/audit.log\nmax_log_file = 32\n"
            "max_log_file_action = keep_logs\nspace_left_action = email\n"
            "admin_space_left_action = single\ndisk_full_action = halt\n"
        ),
        "/etc/modprobe.d/60-cis.conf": "".join(
            f"{line}\nblacklist {name}\n" for name, line in state["modprobe"].items()
        ),
        "/etc/issue": "Authorized users only. All activity may be monitored and reported.\n",
        "/etc/issue.net": "Authorized users only. All activity may be monitored and reported.\n",
        "/etc/motd": "",
        "/etc/crontab": "SHELL=/bin/bash\nPATH=/sbin:/bin:/usr/sbin:/usr/bin\nMAILTO=root\n",
        "/etc/fstab": "".join(
            f"{m['source']} {path} {m['fstype']} {m['options']} 0 0\n"
            for path, m in sorted(state["mounts"].items())
        ),
        "/etc/nsswitch.conf": "passwd: files\nshadow: files\ngroup: files\nhosts: files\n",
    }
    for name, options in sorted(state["sshdDropIns"].items()):
        files[f"/etc/ssh/sshd_config.d/{name}"] = _key_values(options)
    meta: dict[str, dict[str, str]] = state["files"]
    out: dict[str, HostFile] = {}
    for path, content in files.items():
        m = meta.get(path, {})
        out[path] = HostFile(
            content=content,
            mode=m.get("mode", "0644"),
            owner=m.get("owner", "root"),
            group=m.get("group", "root"),
        )
    return out


# ---- commands --------------------------------------------------------------------------------

SSHD_DEFAULTS: dict[str, str] = {
    "port": "22",
    "addressfamily": "any",
    "listenaddress": "0.0.0.0:22",
    "logingracetime": "120",
    "permitrootlogin": "without-password",
    "maxauthtries": "6",
    "maxsessions": "10",
    "maxstartups": "10:30:100",
    "permitemptypasswords": "no",
    "permituserenvironment": "no",
    "hostbasedauthentication": "no",
    "ignorerhosts": "yes",
    "x11forwarding": "no",
    "disableforwarding": "no",
    "clientaliveinterval": "0",
    "clientalivecountmax": "3",
    "loglevel": "INFO",
    "usepam": "yes",
    "banner": "none",
    "pubkeyauthentication": "yes",
    "passwordauthentication": "yes",
    "gssapiauthentication": "no",
    "kbdinteractiveauthentication": "yes",
    "printmotd": "yes",
    "ciphers": "aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes256-ctr,"
    "aes128-gcm@openssh.com,aes128-ctr",
}
"""What `sshd -T` reports for a keyword no file sets (OpenSSH 8.7 as RHEL 9 builds it)."""


def sshd_effective(state: HostState) -> dict[str, str]:
    """sshd's effective options: drop-ins in name order first, then the main file; for each
    keyword the first value read wins."""
    effective: dict[str, str] = {}
    sources = [options for _name, options in sorted(state["sshdDropIns"].items())]
    sources.append(state["sshd"])
    for options in sources:
        for key, value in options.items():
            effective.setdefault(key.lower(), str(value))
    if "challengeresponseauthentication" in effective:
        effective.setdefault(
            "kbdinteractiveauthentication", effective.pop("challengeresponseauthentication")
        )
    return {**SSHD_DEFAULTS, **effective}


@dataclass(frozen=True)
class Answer:
    """What a command prints and its exit status."""

    stdout: str
    stderr: str = ""
    status: int = 0


HOST_COMMANDS = (
    "sshd",
    "systemctl",
    "rpm",
    "sysctl",
    "getenforce",
    "sestatus",
    "auditctl",
    "modprobe",
    "lsmod",
    "findmnt",
    "update-crypto-policies",
    "hostnamectl",
    "uname",
)
"""The commands the modelled host answers itself (every other tool reads the modelled files)."""

MUTATING = {
    "systemctl": {
        "start",
        "stop",
        "restart",
        "reload",
        "enable",
        "disable",
        "mask",
        "unmask",
        "kill",
        "daemon-reload",
        "set-property",
        "edit",
        "isolate",
        "reboot",
        "poweroff",
        "halt",
    },
    "rpm": {"-i", "-U", "-F", "-e", "--install", "--upgrade", "--erase", "--freshen", "-ivh"},
    "sysctl": {"-w", "--write", "-p", "--load", "--system"},
    "auditctl": {"-a", "-A", "-d", "-D", "-w", "-W", "-e", "-f", "-r", "-R", "-b"},
    "modprobe": {"-r", "--remove"},
    "update-crypto-policies": {"--set"},
    "hostnamectl": {"set-hostname", "hostname"},
}
"""Arguments that would change the host: the sandbox refuses them (and says so)."""


def _refusal(command: str, args: list[str]) -> Answer | None:
    words = MUTATING.get(command, set())
    hit = [a for a in args if a in words or any(a.startswith(f"{w}=") for w in words)]
    if command == "sysctl" and any("=" in a and not a.startswith("-") for a in args):
        hit.append("key=value")
    if not hit:
        return None
    return Answer(
        "",
        f"{command}: refused: the evidence sandbox is read-only ({' '.join(args)} would "
        "change the host)\n",
        77,
    )


def _systemctl(state: HostState, args: list[str]) -> Answer:
    services: dict[str, dict[str, str]] = state["services"]
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return Answer(
            "",
            "systemctl: this host answers is-enabled, is-active, status, show, list-unit-files\n",
            1,
        )
    verb, units = words[0], [u.removesuffix(".service") for u in words[1:]]
    if verb in ("is-enabled", "is-active"):
        lines, status = [], 0
        for unit in units:
            service = services.get(unit)
            if service is None:
                value = "not-found" if verb == "is-enabled" else "inactive"
                status = 1 if verb == "is-active" else 4
            else:
                value = service["enabled" if verb == "is-enabled" else "active"]
                good = ("enabled", "static", "alias") if verb == "is-enabled" else ("active",)
                if value not in good:
                    status = 1
            lines.append(value)
        if verb == "is-enabled" and any(u not in services for u in units):
            return Answer(
                "",
                "".join(
                    f"Failed to get unit file state for {u}.service: No such file or directory\n"
                    for u in units
                    if u not in services
                ),
                1,
            )
        return Answer("".join(f"{line}\n" for line in lines), "", status)
    if verb == "status":
        out, status = [], 0
        for unit in units:
            service = services.get(unit)
            if service is None:
                return Answer("", f"Unit {unit}.service could not be found.\n", 4)
            loaded = "masked" if service["enabled"] == "masked" else "loaded"
            active = "active (running)" if service["active"] == "active" else "inactive (dead)"
            status = status or (0 if service["active"] == "active" else 3)
            out.append(
                f"● {unit}.service\n     Loaded: {loaded} "
                f"(/usr/lib/systemd/system/{unit}.service; {service['enabled']}; "
                "preset: enabled)\n"
                f"     Active: {active}\n"
            )
        return Answer("".join(out), "", status)
    if verb == "show":
        out = []
        for unit in units:
            service = services.get(unit, {"enabled": "not-found", "active": "inactive"})
            out.append(
                f"Id={unit}.service\nUnitFileState={service['enabled']}\n"
                f"ActiveState={service['active']}\n"
                f"SubState={'running' if service['active'] == 'active' else 'dead'}\n"
            )
        return Answer("\n".join(out), "", 0)
    if verb in ("list-unit-files", "list-units"):
        rows = [
            f"{name}.service {s['enabled'] if verb == 'list-unit-files' else s['active']}"
            for name, s in sorted(services.items())
        ]
        return Answer("".join(f"{r}\n" for r in rows), "", 0)
    return Answer("", f"systemctl: unknown command {verb!r} on this host\n", 1)


def _rpm(state: HostState, args: list[str]) -> Answer:
    packages: dict[str, str] = state["packages"]
    if "-qa" in args or ("-q" in args and "-a" in args):
        return Answer("".join(f"{n}-{v}.x86_64\n" for n, v in sorted(packages.items())))
    if "-q" in args or "--query" in args:
        names = [a for a in args if not a.startswith("-")]
        out: list[str] = []
        err: list[str] = []
        status = 0
        for name in names:
            if name in packages:
                out.append(f"{name}-{packages[name]}.x86_64\n")
            else:
                out.append(f"package {name} is not installed\n")
                status = 1
        return Answer("".join(out), "".join(err), status)
    return Answer("", "rpm: this host answers queries (-q NAME, -qa)\n", 1)


def _sysctl(state: HostState, args: list[str]) -> Answer:
    values: dict[str, str] = state["sysctl"]
    bare = "-n" in args or "--values" in args
    if "-a" in args or "--all" in args:
        return Answer("".join(f"{k} = {v}\n" for k, v in sorted(values.items())))
    keys = [a for a in args if not a.startswith("-")]
    out: list[str] = []
    err: list[str] = []
    status = 0
    for key in keys:
        name = key.replace("/", ".")
        if name not in values:
            err.append(
                f"sysctl: cannot stat /proc/sys/{name.replace('.', '/')}: No such file or "
                "directory\n"
            )
            status = 255
        else:
            out.append(f"{values[name]}\n" if bare else f"{name} = {values[name]}\n")
    return Answer("".join(out), "".join(err), status)


def _modprobe(state: HostState, args: list[str]) -> Answer:
    names = [a for a in args if not a.startswith("-")]
    if not names:
        return Answer("", "modprobe: this host answers modprobe -n -v NAME\n", 1)
    rules: dict[str, str] = state["modprobe"]
    out = []
    for name in names:
        rule = rules.get(name)
        if rule is not None:
            out.append(f"install {rule.split(' ', 2)[-1]}\n")
        else:
            out.append(f"insmod /lib/modules/{state['kernel']}/kernel/fs/{name}/{name}.ko.xz\n")
    return Answer("".join(out))


def _findmnt(state: HostState, args: list[str]) -> Answer:
    mounts: dict[str, dict[str, str]] = state["mounts"]
    paths = [a for a in args if a.startswith("/")]
    chosen = {p: mounts[p] for p in paths if p in mounts} if paths else mounts
    if paths and not chosen:
        return Answer("", "", 1)
    rows = [f"{p} {m['source']} {m['fstype']} {m['options']}" for p, m in sorted(chosen.items())]
    return Answer("".join(f"{r}\n" for r in rows))


def command_answer(state: HostState, argv: list[str]) -> Answer:
    """What one of `HOST_COMMANDS` prints on the host.

    Args:
        state: The host's state.
        argv: The command and its arguments (argv[0] may be a path).
    """
    command = argv[0].rsplit("/", 1)[-1] if argv else ""
    args = argv[1:]
    refused = _refusal(command, args)
    if refused is not None:
        return refused
    if command == "sshd":
        if "-T" not in args:
            return Answer("", "sshd: this host answers sshd -T (the effective configuration)\n", 1)
        return Answer("".join(f"{k} {v}\n" for k, v in sorted(sshd_effective(state).items())))
    if command == "systemctl":
        return _systemctl(state, args)
    if command == "rpm":
        return _rpm(state, args)
    if command == "sysctl":
        return _sysctl(state, args)
    if command == "getenforce":
        return Answer(f"{state['selinux']['mode'].capitalize()}\n")
    if command == "sestatus":
        selinux = state["selinux"]
        return Answer(
            f"SELinux status:                 enabled\n"
            f"Loaded policy name:             {selinux['policy']}\n"
            f"Current mode:                   {selinux['mode']}\n"
            f"Mode from config file:          {selinux['config']}\n"
        )
    if command == "auditctl":
        if "-l" in args:
            return Answer("".join(f"{r}\n" for r in state["auditRules"] if not r.startswith("-e")))
        if "-s" in args:
            enabled = 2 if "-e 2" in state["auditRules"] else 1
            return Answer(f"enabled {enabled}\nfailure 1\npid 812\nbacklog_limit 8192\n")
        return Answer("", "auditctl: this host answers -l and -s\n", 1)
    if command == "modprobe":
        return _modprobe(state, args)
    if command == "lsmod":
        rows = [f"{m:<24}{16384:>8}  0" for m in state["loadedModules"]]
        return Answer("Module                  Size  Used by\n" + "".join(f"{r}\n" for r in rows))
    if command == "findmnt":
        return _findmnt(state, args)
    if command == "update-crypto-policies":
        return Answer(f"{state['cryptoPolicy']}\n")
    if command == "hostnamectl":
        release = _release(state)
        return Answer(
            f" Static hostname: {state['hostname']}\n"
            f"Operating System: {release['name']} {release['version']} ({release['codename']})\n"
            f"          Kernel: Linux {state['kernel']}\n"
        )
    if command == "uname":
        if "-r" in args:
            return Answer(f"{state['kernel']}\n")
        if "-a" in args:
            return Answer(f"Linux {state['hostname']} {state['kernel']} x86_64 GNU/Linux\n")
        return Answer("Linux\n")
    return Answer("", f"{command}: command not found\n", 127)


def answers_table(state: HostState) -> str:
    """The state as JSON, for the sandbox's command shims."""
    return json.dumps(state, sort_keys=True)


def quote(argv: list[str]) -> str:
    """A command line as a shell would show it."""
    return " ".join(shlex.quote(a) for a in argv)
