"""The parsers of ascend-check's own probes (checks/parsers/os_commands.py, cann_python.py): each reads
what its probe prints on a node and refuses, naming the line, anything else; and the checks turn that
refusal into an `error`, never a pass."""

from __future__ import annotations

import pytest
from checks_fakenode import fake_host

from ascend_ready.checks.parsers import cann_python, os_commands
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import Snapshot
from ascend_ready.errors import ParseError

HEALTHY = fake_host().probes

#: probe -> (its parser, the check that reads it)
PARSERS = {
    "disk-free": (os_commands.parse_df, "os.disk_free"),
    "shm": (os_commands.parse_df, "os.shm"),
    "thp-enabled": (os_commands.parse_thp, "os.thp"),
    "sysctl": (os_commands.parse_sysctl, "os.numa_balancing"),
    "user-limits": (os_commands.parse_user_limits, "os.nofile"),
    "accounts": (os_commands.parse_accounts, "os.driver_user"),
    "glibc": (os_commands.parse_glibc, "os.glibc"),
    "kernel-headers": (os_commands.parse_kernel_headers, "os.kernel_headers"),
    "clock": (os_commands.parse_clock, "os.clock_sync"),
    "clock-offset": (os_commands.parse_clock_offset, "os.clock_sync"),
    "reboot-marker": (os_commands.parse_reboot_marker, "os.reboot_pending"),
    "pci-topology": (os_commands.parse_pci_parents, "pcie.link_width"),
    "cann-components": (cann_python.parse_cann_components, "versions.installed"),
    "python-packages": (cann_python.parse_python_packages, "versions.installed"),
    "user-libs": (cann_python.parse_user_libs, "versions.user_libs"),
    "set-env": (cann_python.parse_set_env, "versions.set_env"),
    "torch-import": (cann_python.parse_torch_import, "versions.torch_npu_import"),
    "training-env": (cann_python.parse_training_env, "versions.training_env"),
}


def only(check_id, host):
    report = run_checks(
        Snapshot(hosts={host.name: host}),
        {host.name: load_profile()},
        select_checks("full", select=[check_id]),
    )
    (result,) = report.results
    return result


@pytest.mark.parametrize("probe", sorted(PARSERS))
def test_a_healthy_nodes_output_parses(probe):
    parse, _check = PARSERS[probe]
    parse(HEALTHY[probe].stdout)


@pytest.mark.parametrize("probe", sorted(PARSERS))
def test_a_line_the_probe_never_prints_is_refused_and_the_check_errors(probe):
    parse, check = PARSERS[probe]
    text = HEALTHY[probe].stdout + "a line the probe never prints\n"
    with pytest.raises(ParseError) as err:
        parse(text)
    assert err.value.line == "a line the probe never prints"
    assert err.value.line_no == len(text.splitlines())
    r = only(check, fake_host(outputs={probe: text}))
    assert r.status == "error" and r.message.startswith("cannot parse "), (check, r.status, r.message)


@pytest.mark.parametrize(
    ("parse", "text", "reason"),
    [
        (
            os_commands.parse_user_limits,
            "user root\nnofile 1 1\nmemlock 1 1\nstack 8192 8192\n",
            "unknown line 'stack'",
        ),
        (os_commands.parse_user_limits, "user root\nnofile 1048576 1048576\n", "no 'memlock' line"),
        (
            os_commands.parse_user_limits,
            "user root\nnofile  1048576\nmemlock 1 1\n",
            "expected 'nofile HARD SOFT'",
        ),
        (os_commands.parse_sysctl, "kernel.numa_balancing=0\n", "expected 'name.of.key = value'"),
        (os_commands.parse_sysctl, "kernel.numa_balancing = 0\nkernel.numa_balancing = 1\n", "printed twice"),
        (os_commands.parse_thp, "always madvise never\n", "exactly one [selected] mode"),
        (os_commands.parse_glibc, "musl libc (x86_64)\n", "expected 'glibc X.Y'"),
        (os_commands.parse_kernel_headers, "headers /lib/modules/x/build\n", "no 'kernel RELEASE' line"),
        (os_commands.parse_clock, "NTPSynchronized=maybe\n", "expected yes or no"),
        (os_commands.parse_clock_offset, "System time     : 0.1 seconds sideways of NTP time\n",
         "expected 'System time : N seconds fast|slow of NTP time'"),
        (os_commands.parse_clock_offset, "       Offset: +1.4parsecs\n", "is not a systemd time span"),
        (os_commands.parse_machine_identity, "machine-id xyz\nboot-id 1\n", "is not an id"),
        (os_commands.parse_machine_identity, "boot-id 1\n", "expected 'machine-id VALUE'"),
        (cann_python.parse_python_packages, "dist torch 2.9.0 - /site\n", "no 'python X.Y.Z' line"),
        (cann_python.parse_cann_components, "version=8.5.0\n", "expected '== /path/to/install.info'"),
        (
            cann_python.parse_cann_components,
            "== /usr/local/Ascend/nnal/atb/8.5.0/ascend_nnal_install.info\npackage_name=Ascend-cann-nnal\n",
            "no version line",
        ),
        (
            cann_python.parse_torch_import,
            "torch 2.9.0\ntorch_npu 2.9.0\nnpu_available True\n",
            "no 'device_count'",
        ),
    ],
)
def test_a_wrong_shape_names_what_is_wrong(parse, text, reason):
    with pytest.raises(ParseError) as err:
        parse(text)
    assert reason in err.value.reason


#: `cat /usr/local/Ascend/nnal/atb/latest/version.info` as a deployment note on a public GitHub page
#: printed it (NNAL 8.2.RC2; code-index id 4926109241): `Key : value`, indented, no `version=` line.
NNAL_VERSION_INFO = """\
    Ascend-cann-atb : 8.2.RC2
    Ascend-cann-atb Version : 8.2.RC2.B030
    Platform : aarch64
    branch : br_release_cann_8.2.RC1_20251226
    commit id : 02a94694766ebf12d820aa4b5d9c95c4fe149379
"""


def test_the_nnal_version_file_reads_as_its_release():
    text = (
        HEALTHY["cann-components"].stdout
        + "== /usr/local/Ascend/nnal/atb/latest/version.info\n"
        + NNAL_VERSION_INFO
    )
    parsed = cann_python.parse_cann_components(text)
    assert parsed.components["nnal"].version == "8.2.RC2"
    assert parsed.components["ops"].path.endswith("/ascend_ops_install.info")


def test_what_the_tools_print_for_nothing_is_a_fact_not_an_error():
    # No account, no set_env.sh, no component: empty outputs the probes print on a bare node.
    assert os_commands.parse_accounts("").users == {}
    assert cann_python.parse_set_env("").paths == []
    assert cann_python.parse_cann_components("").components == {}
    chrony = "Reference ID    : 0A000001 (10.0.0.1)\nLeap status     : Not synchronised\n"
    assert os_commands.parse_clock(chrony).synchronized is False
