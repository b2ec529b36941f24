"""The seccomp profile of task containers: everything allowed but the calls listed here.

Docker's default profile allows `ptrace` (and `process_vm_readv`...) between processes of one uid;
we refuse them, so no process in a task container can trace or read another, whatever its uid
and dumpable flag. The other refusals cover what Docker's default refuses to a container without
CAP_SYS_ADMIN (mounts, namespaces, keyrings, kernel modules, clocks...) plus io_uring, whose
operations bypass seccomp. Refused calls fail with EPERM (`clone3` with ENOSYS, so that the C
library falls back to `clone`, whose namespace flags can be filtered). 32-bit and x32 system calls
are filtered with their own numbers (the sub-architectures), not let through.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from docker import DockerClient

from endless_assets.sandbox.engine.provider import provider_for

EPERM, ENOSYS = 1, 38

DENIED = (
    # tracing and reading other processes
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "pidfd_getfd",
    "kcmp",
    # file handles (with CAP_DAC_READ_SEARCH, a way out to the host's filesystem)
    "open_by_handle_at",
    # namespaces and mounts
    "unshare",
    "setns",
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # kernel attack surface an unprivileged process could otherwise reach
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "lookup_dcookie",
    "uselib",
    "nfsservctl",
    "mbind",
    "set_mempolicy",
    "migrate_pages",
    "move_pages",
    "fanotify_init",
    # the machine itself
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "settimeofday",
    "stime",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "quotactl",
    "quotactl_fd",
    "iopl",
    "ioperm",
    "vm86",
    "vm86old",
    "_sysctl",
)

# clone() flags that make namespaces: each one refused (one rule per flag: the filter's
# comparisons are equalities).
NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


def profile() -> dict:
    rules: list[dict] = [
        {"names": list(DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS},
    ]
    for flag in NAMESPACE_FLAGS:
        rules.append(
            {
                "names": ["clone"],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": EPERM,
                "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
            }
        )
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "archMap": [
            {
                "architecture": "SCMP_ARCH_X86_64",
                "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            },
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
        ],
        "syscalls": rules,
    }


PROFILE_JSON = json.dumps(profile(), separators=(",", ":"))
# Docker's form (the profile inline); each engine's provider (provider.py) gives its own.
SECURITY_OPT = f"seccomp={PROFILE_JSON}"


class Bounds(Protocol):
    """What a container may use: container.Limits, a models.Service."""

    memory: str
    cpus: float
    pids: int


def confined_host_config(
    client: DockerClient, bounds: Bounds, *, caps: list[str], **rest: Any
) -> dict:
    """The host config of every container we start (a task's, a verifier, a service): under an
    init, within its `bounds`, every capability dropped but `caps`, no new privileges, this
    profile, never privileged; `rest` adds to it (network, tmpfs, logs, ulimits, volumes)."""
    engine = provider_for(client)
    return client.api.create_host_config(
        init=True,
        mem_limit=bounds.memory,
        memswap_limit=bounds.memory,
        nano_cpus=int(bounds.cpus * 1e9),
        pids_limit=bounds.pids,
        cap_drop=["ALL"],
        cap_add=caps,
        security_opt=["no-new-privileges", engine.seccomp_option(PROFILE_JSON)],
        privileged=False,
        **rest,
    )
