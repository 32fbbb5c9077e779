"""The kernel layers that confine a sandbox worker (Linux): rlimits, network namespace, Landlock, seccomp.

Each function is irreversible for the calling process, which is the point: the worker warms up (imports
pandas, pyarrow, numpy, pyseccomp), then locks itself down before it runs any generated code. A layer the
kernel cannot provide raises `LayerUnavailable`; the worker records that and runs weaker.

Loaded by file path inside the worker, so it imports only the standard library (and pyseccomp lazily).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import site
import socket
import sys
import sysconfig

# The names SandboxLevel reports, in the order the layers go on.
LAYERS = ("rlimits", "netns", "landlock", "seccomp", "fresh_fork")

_CLONE_NEWNET = 0x40000000
_CLONE_THREAD = 0x00010000
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class LayerUnavailable(Exception):
    """The kernel (or platform) cannot provide this layer."""


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise LayerUnavailable(f"{what}: {os.strerror(err)}")
    return result


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies, so no child outlives its zygote."""
    if sys.platform.startswith("linux"):
        _libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)


def _no_new_privs() -> None:
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


# --------------------------------------------------------------------------- rlimits


def set_rlimits(*, memory_bytes: int, cpu_s: int, nofile: int = 64) -> None:
    """Cap address space, CPU seconds, open files and file size, and turn off core dumps.

    The CPU soft limit sends SIGXCPU one second before the hard limit's SIGKILL. RLIMIT_NPROC is not set:
    it does nothing for root and counts threads for everyone else; seccomp is what stops forks.
    """
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    # Generated code never needs to write a file; with FSIZE 0 any write fails with EFBIG.
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# --------------------------------------------------------------------------- network namespace


def enter_empty_netns() -> None:
    """Move this process into a new network namespace that has only a loopback device, which is down."""
    if not sys.platform.startswith("linux"):
        raise LayerUnavailable("network namespaces exist only on Linux")
    _check(_libc.unshare(ctypes.c_int(_CLONE_NEWNET)), "unshare(CLONE_NEWNET)")


# --------------------------------------------------------------------------- Landlock

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
# Every filesystem right by the ABI that introduced it: 1 has bits 0-12, 2 adds REFER, 3 TRUNCATE, 5 IOCTL_DEV.
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_ONLY_RIGHTS = _FS_EXECUTE | _FS_READ_FILE | (1 << 1) | (1 << 14) | (1 << 15)
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers, 0 when it has none."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def restrict_filesystem(read_paths: list[str]) -> int:
    """Allow only reading (and mapping) files beneath `read_paths`; deny every write, TCP and outside signal.

    With ABI 4+ TCP bind/connect are denied too, and with ABI 6+ signals and abstract unix sockets cannot
    reach processes outside this domain. Returns the ABI used.
    """
    abi = landlock_abi()
    if abi < 1:
        raise LayerUnavailable("Landlock is not offered by this kernel")
    fs_rights = _FS_RIGHTS_BY_ABI[min(abi, 5)]
    attr = _RulesetAttr(
        fs_rights,
        (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
        (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    # Older kernels reject a struct larger than the one they know.
    attr_size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _check(
        _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(attr_size), ctypes.c_uint32(0)),
        "landlock_create_ruleset",
    )
    try:
        read_only = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
        for path in read_paths:
            _allow_beneath(ruleset, path, read_only)
        _no_new_privs()
        _check(_libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _allow_beneath(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path this machine does not have needs no rule
    try:
        if not os.path.isdir(path):
            rights &= _FILE_ONLY_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _check(
            _libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                          ctypes.byref(rule), ctypes.c_uint32(0)),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(fd)


def python_read_paths() -> list[str]:
    """The directories the interpreter may still read after lockdown: its own libraries and time zones.

    Lazy imports inside pandas and the standard library need the Python prefixes and site-packages;
    shared libraries live under the lib dirs; pandas reads time zones from the zoneinfo database.
    """
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(sysconfig.get_path(key) for key in ("stdlib", "platstdlib", "purelib", "platlib"))
    paths.update(site.getsitepackages())
    paths.update(("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo", "/etc/localtime"))
    return sorted(p for p in paths if p and os.path.exists(p))


# --------------------------------------------------------------------------- seccomp

# Syscalls generated code never needs and an attacker would: new programs and processes, sockets, other
# processes' memory, kernel surface, and ways out of the worker's process group.
_DENIED_SYSCALLS = (
    "execve", "execveat", "fork", "vfork",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "tkill",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "move_mount",
    "open_tree", "open_by_handle_at", "name_to_handle_at",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "sethostname", "setdomainname",
    "mknod", "mknodat", "personality", "setsid", "setpgid",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
)


def seccomp_available() -> bool:
    """Whether pyseccomp (and the libseccomp it wraps) can be loaded; import it before any lockdown."""
    try:
        import pyseccomp  # noqa: F401  (its import runs ldconfig, which a locked-down process cannot)
    except (ImportError, OSError, RuntimeError):
        return False
    return True


def install_syscall_filter() -> None:
    """Load a seccomp filter: allow by default, deny the syscalls above, kill on a foreign architecture.

    Default-allow keeps numpy, pandas and pyarrow working; the arg filters let threads be created (clone
    with CLONE_THREAD) but not processes, and let the process signal only itself. clone3 hides its flags
    in memory the filter cannot read, so it gets ENOSYS and glibc falls back to clone.
    """
    try:
        import pyseccomp as sc
    except (ImportError, OSError, RuntimeError) as exc:
        raise LayerUnavailable(f"pyseccomp cannot be loaded: {exc}") from None
    me = os.getpid()
    deny = sc.ERRNO(errno.EPERM)
    filt = sc.SyscallFilter(sc.ALLOW)
    # An i386 `int 0x80` syscall would bypass an x86_64 filter; kill the whole process, not one thread.
    filt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    filt.set_attr(sc.Attr.CTL_TSYNC, 1)
    for name in _DENIED_SYSCALLS:
        try:
            filt.add_rule(deny, name)
        except (ValueError, RuntimeError, OSError):
            pass  # not a syscall on this architecture
    filt.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        filt.add_rule(deny, name, sc.Arg(0, sc.NE, me))
    # Root may raise its own hard rlimits; reading them (prlimit64 with no new limit) stays allowed.
    filt.add_rule(deny, "setrlimit")
    filt.add_rule(deny, "prlimit64", sc.Arg(2, sc.NE, 0))
    try:
        _no_new_privs()
        filt.load()
    except (OSError, RuntimeError, LayerUnavailable) as exc:
        raise LayerUnavailable(f"seccomp filter could not be loaded: {exc}") from None


# --------------------------------------------------------------------------- applying and probing

CHILD_LAYERS = ("rlimits", "landlock", "seccomp")  # applied by each forked child; netns by the zygote


def apply_layer(name: str, *, memory_mb: int, cpu_s: int, read_paths: list[str]) -> None:
    """Apply one of the per-child layers to the calling process."""
    if name == "rlimits":
        set_rlimits(memory_bytes=memory_mb << 20, cpu_s=cpu_s)
    elif name == "landlock":
        restrict_filesystem(read_paths)
    elif name == "seccomp":
        install_syscall_filter()
    else:
        raise ValueError(f"unknown per-child layer {name!r}")


def probe_layers(wanted: list[str], *, memory_mb: int) -> tuple[set[str], list[str]]:
    """Apply each wanted per-child layer in a throwaway forked child and check that it really blocks.

    Returns the layers that held and a note for each that did not. Probing in a child keeps the caller
    unrestricted, so it can still fork the real children afterwards.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        held, notes = [], []
        for name in wanted:
            try:
                apply_layer(name, memory_mb=memory_mb, cpu_s=5, read_paths=python_read_paths())
                _verify_layer(name)
                held.append(name)
            except Exception as exc:  # noqa: BLE001  (any failure means the layer does not hold)
                notes.append(f"{name} unavailable: {exc}")
        os.write(write_fd, json.dumps({"held": held, "notes": notes}).encode())
        os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    try:
        report = json.loads(b"".join(chunks))
    except ValueError:
        return set(), [f"the layer probe died; running without {', '.join(wanted)}"]
    return set(report["held"]), list(report["notes"])


def _verify_layer(name: str) -> None:
    """Raise unless the layer visibly blocks something it is meant to block."""
    if name == "landlock":
        try:
            os.close(os.open("/", os.O_RDONLY | os.O_DIRECTORY))
        except PermissionError:
            return
        raise RuntimeError("Landlock was applied but / is still readable")
    if name == "seccomp":
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        except PermissionError:
            return
        raise RuntimeError("the seccomp filter was loaded but socket() still works")
