"""The OS and version checks on synthetic snapshots and real captured samples: kernel settings, limits,
glibc, disks, shared memory, the clock and its offset, the installed stack and the training env."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

from checks_fakenode import (
    DF_HEADER,
    fake_host,
    only,
    stand_ins,
    torch_import_output,
)

from ascend_ready.checks.snapshot import ProbeResult

# ---------------------------------------------------------------- OS


def test_os_thp():
    r = only("os.thp", fake_host(outputs={"thp-defrag": "always defer defer+madvise [madvise] never\n"}))
    assert r.status == "fail" and r.message == "THP defrag is madvise, should be never"


def test_os_numa_balancing():
    r = only("os.numa_balancing", fake_host(outputs={"sysctl": "kernel.numa_balancing = 1\n"}))
    assert r.status == "fail" and r.message == "kernel.numa_balancing is 1, should be 0"


def test_os_nofile():
    r = only(
        "os.nofile",
        fake_host(outputs={"user-limits": "user root\nnofile 65536 1024\nmemlock unlimited unlimited\n"}),
    )
    assert r.status == "fail" and r.message == "nofile is 1024 (soft) / 65536 (hard), should be >= 1048576"


def test_os_memlock():
    r = only(
        "os.memlock",
        fake_host(outputs={"user-limits": "user root\nnofile 1048576 1048576\nmemlock 65536 65536\n"}),
    )
    assert r.status == "fail" and r.message == "memlock is 65536 (soft) / 65536 (hard), should be unlimited"
    wrong_user = fake_host(
        outputs={"user-limits": "user ascend\nnofile 1048576 1048576\nmemlock unlimited unlimited\n"}
    )
    assert only("os.memlock", wrong_user).status == "fail"


def test_os_driver_user():
    r = only("os.driver_user", fake_host(outputs={"accounts": "root:x:0:0:root:/root:/bin/bash\n"}))
    assert r.status == "fail" and r.message == "user HwHiAiUser and group HwHiAiUser missing"


def test_os_glibc():
    r = only("os.glibc", fake_host(outputs={"glibc": "glibc 2.17\n"}))
    assert r.status == "fail"
    assert r.message.startswith("glibc is 2.17: torch ") and "needs glibc 2.28" in r.message
    assert "numpy" not in r.message  # manylinux2014 (2.17) is fine


def test_os_kernel_headers():
    r = only("os.kernel_headers", fake_host(outputs={"kernel-headers": "kernel 5.15.0-91-generic\n"}))
    assert r.status == "fail" and r.message == "no kernel headers for the running kernel 5.15.0-91-generic"


def test_os_disk_free():
    df = DF_HEADER + "/dev/sda1 104857600 94371840 10485760 90% /\n"
    r = only("os.disk_free", fake_host(outputs={"disk-free": df}))
    assert r.status == "fail" and r.message == "10.0 GB free under / (/), need 100 GB"


def test_os_shm():
    df = "Filesystem 1024-blocks Used Available Capacity Mounted on\ntmpfs 65536 0 65536 0% /dev/shm\n"
    r = only("os.shm", fake_host(outputs={"shm": df}))
    assert r.status == "fail" and r.message == "/dev/shm is 0.1 GB, need 8 GB"


def test_os_clock_sync():
    r = only("os.clock_sync", fake_host(outputs={"clock": "NTPSynchronized=no\n"}))
    assert r.status == "fail" and r.message == "the clock is not synchronized"
    chrony = "Reference ID    : 0A000001 (10.0.0.1)\nLeap status     : Normal\n"
    assert only("os.clock_sync", fake_host(outputs={"clock": chrony})).status == "pass"
    none = "no time sync tool answered (timedatectl, chronyc, ntpstat)\n"
    assert only("os.clock_sync", fake_host(outputs={"clock": none})).status == "fail"


def test_os_reboot_pending(tmp_path):
    # the marker's probe output as its own shell prints it (tests/checks/test_reboot_pending.py)
    from test_reboot_pending import judge, probe_output

    assert judge(probe_output(tmp_path, present=True)).status == "fail"
    assert judge(probe_output(tmp_path, present=False)).status == "pass"


# ---------------------------------------------------------------- versions


def test_versions_installed():
    none = ProbeResult(command="...", rc=1, stderr="no ascend_toolkit_install.info\n")
    r = only("versions.installed", fake_host(outputs={"toolkit-version": none, "cann-components": ""}))
    assert r.status == "fail" and r.message == "not installed: cann, ops, nnal"


def test_versions_stack():
    host = fake_host()
    drift = host.probes["driver-version"].stdout.replace("Version=25.5.1", "Version=23.0.6")
    r = only("versions.stack", fake_host(outputs={"driver-version": drift}))
    assert r.status == "fail"
    assert r.message.startswith("driver is 23.0.6, should be 25.5.1")


def test_versions_stack__torch_mismatch_like_the_real_sample():
    # mind-cluster fixture: torch 1.11.0 next to torch-npu 2.1.0.post8 (a broken pair).
    text = fake_host().probes["python-packages"].stdout
    text = text.replace("dist torch 2.9.0 ", "dist torch 1.11.0 ")
    r = only("versions.stack", fake_host(outputs={"python-packages": text}))
    assert r.status == "fail" and "torch" in r.message and "1.11.0" in r.message


def test_versions_set_env():
    r = only("versions.set_env", fake_host(outputs={"set-env": "/usr/local/Ascend/nnal/atb/set_env.sh\n"}))
    assert r.status == "fail"
    # The toolkit is installed in the cann/ layout (CANN 8.5): its set_env.sh is the one to source.
    assert r.message == "no cann/set_env.sh under /usr/local/Ascend"
    none = ProbeResult(command="...", rc=1, stderr="no ascend_toolkit_install.info\n")
    r = only("versions.set_env", fake_host(outputs={"set-env": "", "toolkit-version": none}))
    assert r.status == "fail"
    assert r.message == "no ascend-toolkit/set_env.sh or cann/set_env.sh under /usr/local/Ascend"


def test_versions_user_libs():
    libs = (
        "LD_LIBRARY_PATH=\nlib libascendcl.so -\nlib libhccl.so -\nlib libascend_hal.so /x/libascend_hal.so\n"
    )
    r = only("versions.user_libs", fake_host(outputs={"user-libs": libs}))
    assert r.status == "fail"
    assert r.message == "root's LD_LIBRARY_PATH does not find libascendcl.so, libhccl.so"


def _training_env_probe(*python_args: str, pythonpath: str | None = None) -> str:
    """What the training-env probe really prints, run by this interpreter with `python_args`."""
    from ascend_ready.checks.resources.versions import _TRAINING_ENV

    env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    argv = [sys.executable, *python_args, "-c", _TRAINING_ENV]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout


def test_versions_training_env(tmp_path):
    from ascend_ready import __version__

    r = only("versions.training_env", fake_host())
    assert r.status == "pass", r.message
    # -S: no site-packages, as in a venv python_env built without ascend-ready (issue 18)
    r = only("versions.training_env", fake_host(outputs={"training-env": _training_env_probe("-S")}))
    assert r.status == "fail"
    assert "cannot import ascend_ready, torch, torch_npu, transformers, trl" in r.message
    assert "ascend_ready: cannot import (ModuleNotFoundError: No module named 'ascend_ready')" in r.evidence
    # another version of ascend-ready in the venv: refused naming both
    (tmp_path / "ascend_ready").mkdir()
    (tmp_path / "ascend_ready" / "__init__.py").write_text('__version__ = "0.0.9"\n')
    stand_ins(tmp_path / "stand-ins")
    text = _training_env_probe(pythonpath=f"{tmp_path}:{tmp_path / 'stand-ins'}")
    r = only("versions.training_env", fake_host(outputs={"training-env": text}))
    assert r.status == "fail" and f"has ascend-ready 0.0.9, this controller {__version__}" in r.message
    # no interpreter at all (the probe's shell says so): not judged, never a pass
    missing = ProbeResult(command="sh", rc=127, stdout="",
                          stderr="ascend-check: no interpreter /home/ascend/venvs/x/bin/python\n")
    assert only("versions.training_env", fake_host(outputs={"training-env": missing})).status == "error"


def test_versions_training_env_judges_the_training_set_of_the_torch_line(tmp_path):
    """The venv's torch says which training set applies (provision/training_sets.yml): this checkout's
    transformers/TRL under a torch 2.1.0 are not the set of that line, and the check names each."""
    from ascend_ready.provision import training_sets

    info = tmp_path / "torch-2.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.1.0\n")
    stand_ins(tmp_path / "stand-ins")  # torch_npu, as on a node
    text = _training_env_probe(pythonpath=f"{tmp_path}:{tmp_path / 'stand-ins'}")
    assert "dist torch 2.1.0" in text.splitlines()
    r = only("versions.training_env", fake_host(outputs={"training-env": text}))
    want = training_sets.set_for("2.1.0").packages
    assert r.status == "fail"
    assert f"trl {metadata.version('trl')} (the set holds {want['trl']})" in r.message
    assert r.message.endswith("provision/training_sets.yml")
    # the probe without dist lines (an older ascend-check's): judged as before, versions not
    assert only("versions.training_env", fake_host(outputs={"training-env": "\n".join(
        line for line in text.splitlines() if not line.startswith("dist "))})).status == "pass"


def test_versions_torch_npu_import():
    # The probe's own code run against the simulator's stand-in torch_npu, which counts /dev/davinciN.
    assert only("versions.torch_npu_import", fake_host()).status == "pass"
    r = only("versions.torch_npu_import", fake_host(outputs={"torch-import": torch_import_output(7)}))
    assert r.status == "fail" and r.message == "torch_npu sees 7 device(s), npu-smi lists 8"
    r = only("versions.torch_npu_import", fake_host(outputs={"torch-import": torch_import_output(0)}))
    assert r.status == "fail" and r.message == "torch.npu.is_available() is False in python3"


# ---------------------------------------------------------------- the clock's offset (issue 25)

#: chronyc tracking of a real node (zabbix-tooling/zabbix-agent-extensions#39), its System time line
CHRONY_REAL = (
    "Reference ID    : 1.2.3.4 (a.b.c)\nStratum         : 3\nRef time (UTC)  : Fri Feb  3 15:00:29 2012\n"
    "System time     : 0.000001501 seconds slow of NTP time\nLast offset     : -0.000001632 seconds\n"
    "RMS offset      : 0.000002360 seconds\nFrequency       : 331.898 ppm fast\n"
)
#: timedatectl timesync-status as systemd's timedatectl.c prints it (print_ntp_status_info: labels right-
#: aligned to "Root distance", Offset a signed format_timespan)
TIMESYNC = (
    "       Server: 91.189.91.157 (ntp.ubuntu.com)\nPoll interval: 34min 8s (min: 32s; max 34min 8s)\n"
    "         Leap: normal\n      Version: 4\n      Stratum: 2\n    Reference: 11FD1CFB\n"
    "    Precision: 1us (-25)\nRoot distance: 25.482ms (max: 5s)\n       Offset: {offset}\n"
    "        Delay: 22.837ms\n       Jitter: 1.386ms\n Packet count: 3186\n    Frequency: -19.227ppm\n"
)


def test_os_clock_sync_reads_the_offset():
    from ascend_ready.sim.render import chrony

    ok = only("os.clock_sync", fake_host(outputs={"clock-offset": CHRONY_REAL}))
    assert ok.status == "pass" and "System time     : 0.000001501 seconds slow" in "\n".join(ok.evidence)
    # the simulator's chronyc with the clock-offset fault: 612 s fast, still synchronised
    fast = chrony.tracking(True, now=0.0, offset_s=612.0)
    bad = only("os.clock_sync", fake_host(outputs={"clock-offset": fast, "clock": "NTPSynchronized=yes\n"}))
    assert bad.status == "fail"
    assert bad.message == ("the clock is 612.000 s fast of NTP time (chronyc), more than the profile's 1 s")
    slow = only("os.clock_sync", fake_host(outputs={"clock-offset": TIMESYNC.format(offset="-10min 12.5s")}))
    assert slow.status == "fail" and "612.500 s slow of NTP time (timedatectl)" in slow.message
    near = only("os.clock_sync", fake_host(outputs={"clock-offset": TIMESYNC.format(offset="+1.466ms")}))
    assert near.status == "pass"
    none = "no offset source answered (chronyc tracking, timedatectl timesync-status)\n"
    unread = only("os.clock_sync", fake_host(outputs={"clock-offset": none}))
    assert unread.status == "warn" and "offset was not read" in unread.message
    garbled = only("os.clock_sync", fake_host(outputs={"clock-offset": TIMESYNC.format(offset="soon")}))
    assert garbled.status == "error"
