"""Simulator core pieces that need no root: profiles, addressing, inventory text, knob semantics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascend_ready.errors import ConfigError, SimError
from ascend_ready.sim import cli, hw, inventory, knobs, profiles
from ascend_ready.sim.cluster import Cluster, Node
from ascend_ready.sim.faults import parse_params
from ascend_ready.sim.net import Network


def test_profiles_cycle_over_nodes():
    got = [p.name for p in profiles.assign(5, "a2-ubuntu2204, a2-centos76")]
    assert got == ["a2-ubuntu2204", "a2-centos76", "a2-ubuntu2204", "a2-centos76", "a2-ubuntu2204"]
    assert [p.name for p in profiles.assign(2, None)] == [profiles.default_profile()] * 2


def test_profile_parts():
    p = profiles.get("a3-centos76")
    assert (p.hardware, p.os.name, p.os.python, p.os.python_series, p.os.glibc) == (
        "atlas-800t-a3", "centos76", "3.6.15", "3.6", "2.17")
    assert profiles.get("a2-ubuntu2204").os.python == "system"
    assert dict(profiles.get("a2-ubuntu2204").os.knobs) == {"thp_enabled": "madvise"}
    for name in profiles.names():  # every override is a value the kernel would accept
        spec = profiles.get(name).os
        for knob, value in spec.knobs:
            assert knobs.parse_write(knob, value.encode(), dict(spec.knob_choices).get(knob)) == value


def test_every_os_states_its_glibc_kernel_and_ldd_banner():
    from ascend_ready.sim import osident

    specs = {s.name: s for s in profiles.os_specs()}
    assert sorted(specs) == ["centos76", "kylinv10", "openeuler2203", "ubuntu2204"]
    for spec in specs.values():
        assert spec.glibc and spec.kernel and spec.kernel_version and spec.ldd_line and spec.python_shipped
        assert spec.ldd_line.endswith(f") {spec.glibc}")  # the banner's version is the glibc's
        assert spec.python == "system" or spec.python_series == ".".join(spec.python_shipped.split(".")[:2])
    centos = specs["centos76"]
    assert osident.identity_text(centos, "aarch64") == (
        "glibc 2.17\nrelease 3.10.0-957.el7.aarch64\nversion #1 SMP Thu Nov 8 23:39:32 UTC 2018\n")
    assert osident.libc_links(centos)["/usr/lib64/libc.so.6"] == "libc-2.17.so"
    assert list(osident.libc_links(specs["openeuler2203"])) == ["/usr/lib64/libc.so.6"]  # 2.34: no libc-X.so
    debian_ldd = Path("/usr/bin/ldd").read_text()
    text = osident.ldd_script(debian_ldd, centos)
    assert "echo 'ldd (GNU libc) 2.17'" in text and '" "2012"' in text
    assert "Debian GLIBC" in debian_ldd and "Debian GLIBC" not in text
    with pytest.raises(ValueError, match="--version banner"):
        osident.ldd_script("#!/bin/sh\nexec true\n", centos)


def test_the_preload_library_builds_and_a_missing_compiler_is_no_failure(tmp_path, monkeypatch):
    from ascend_ready.sim import osident

    if not (os.path.exists("/usr/bin/cc") or os.path.exists("/usr/bin/gcc")):
        pytest.skip("no C compiler here")
    lib = osident.build(tmp_path)
    assert lib is not None and lib.name.startswith("libosident-") and osident.build(tmp_path) == lib
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert osident.build(tmp_path / "other") is None


@pytest.mark.parametrize("bad", ["a9-ubuntu2204", "a2-windows", "a2", ""])
def test_unknown_profile_is_a_config_error(bad):
    with pytest.raises(ConfigError):
        profiles.assign(1, bad or ",")


def test_every_profile_hardware_exists_in_the_hardware_model():
    hw = pytest.importorskip("ascend_ready.sim.hw")
    for name in profiles.names():
        assert profiles.get(name).hardware in hw.HARDWARE, name


def test_every_os_has_identity_files_and_a_source():
    for name in profiles.names():
        spec = profiles.get(name).os
        assert (spec.files / "etc" / "os-release").is_file(), name
        assert (spec.files.parent / "SOURCE").read_text().strip(), name


def test_addressing_stays_inside_the_private_subnet():
    net = Network.for_run_dir("/run/x", "10.251.7.0/24")
    assert (net.host_ip, net.gateway_ip, net.node_ip(1), net.node_ip(8)) == (
        "10.251.7.1", "10.251.7.254", "10.251.7.11", "10.251.7.18")
    with pytest.raises(SimError):
        net.node_ip(244)  # would be the gateway
    assert len(net.host_if) <= 15 and len(net.node_if(999)) <= 15  # Linux interface-name limit
    assert Network.for_run_dir("/run/a").tag != Network.for_run_dir("/run/b").tag
    with pytest.raises(SimError, match="not private"):
        Network.for_run_dir("/run/x", "8.8.8.0/24")


def test_inventory_pins_known_hosts_and_key(tmp_path: Path):
    c = Cluster(run_dir=tmp_path, subnet="10.251.0.0/24", base="/b", nodes=[
        Node("node01", 1, "10.251.0.11", "a2-centos76", "atlas-800t-a2", "centos76")])
    text = inventory.ini(c)
    assert "node01 ansible_host=10.251.0.11 ascend_sim_profile=a2-centos76" in text
    assert f"ansible_ssh_private_key_file={tmp_path}/ssh/id_ed25519" in text
    assert (f"ansible_ssh_common_args='-o UserKnownHostsFile={tmp_path}/known_hosts "
            "-o StrictHostKeyChecking=yes") in text
    cfg = inventory.ssh_config(c)
    assert "Host node01 10.251.0.11\n  HostName 10.251.0.11\n" in cfg
    assert "StrictHostKeyChecking yes" in cfg


def test_inventory_names_each_nodes_bundled_check_profile():
    """ascend_check_profile per hardware group (the product reads only that variable), and the copy of
    this output in tests/fleet/test_fleet_inventory.py is what ascend-sim really prints."""
    c = Cluster(run_dir=Path("/run/ascend-sim"), subnet="10.251.0.0/24", base="/b", nodes=[
        Node("node01", 1, "10.251.0.11", "a2-ubuntu2204", "atlas-800t-a2", "ubuntu2204"),
        Node("node04", 4, "10.251.0.14", "a3-openeuler2203", "atlas-800t-a3", "openeuler2203")])
    text = inventory.ini(c)
    assert "[ascend_sim_atlas_800t_a2]\nnode01\n\n[ascend_sim_atlas_800t_a2:vars]\n" \
           "ascend_check_profile=atlas-800t-a2\n" in text
    assert text.index("[ascend_sim_atlas_800t_a3:vars]\nascend_check_profile=atlas-800t-a3") < text.index(
        "[ascend_nodes]")
    bundled = {p.stem for p in (Path(__file__).parents[2] / "checks" / "profiles").glob("*.yml")}
    assert set(hw.HARDWARE) <= bundled  # every hardware model is named like a bundled profile
    copy = (Path(__file__).parents[1] / "fleet" / "test_fleet_inventory.py").read_text()
    copied = copy.split('SIM_INI = """', 1)[1].split('"""', 1)[0].replace("\\\n", "")
    assert copied == text


@pytest.mark.parametrize(("name", "value", "shown"), [
    ("thp_enabled", "never", "always madvise [never]\n"),
    ("thp_enabled", "always", "[always] madvise never\n"),
    ("thp_defrag", "defer+madvise", "always defer [defer+madvise] madvise never\n"),
    ("numa_balancing", "0", "0\n"),
])
def test_knob_render_is_kernel_format(name, value, shown):
    assert knobs.render(name, value) == shown


@pytest.mark.parametrize(("name", "data", "value"), [
    ("thp_enabled", b"never\n", "never"), ("thp_enabled", b"madvise", "madvise"),
    ("numa_balancing", b"0\n", "0"), ("numa_balancing", b"  1 \n", "1"),
])
def test_knob_writes_the_kernel_accepts(name, data, value):
    assert knobs.parse_write(name, data) == value


@pytest.mark.parametrize(("name", "data"), [
    ("thp_enabled", b"[never]\n"), ("thp_enabled", b"never\n\n"), ("thp_enabled", b"Never"),
    ("thp_defrag", b"sometimes\n"), ("numa_balancing", b"7\n"), ("numa_balancing", b"on\n"),
    ("numa_balancing", b"\xff"),
])
def test_knob_writes_the_kernel_refuses(name, data):
    with pytest.raises(knobs.KnobError):
        knobs.parse_write(name, data)


def test_knob_choices_of_an_older_kernel(tmp_path: Path):
    centos = dict(profiles.get("a2-centos76").os.knob_choices)
    store = knobs.KnobStore(tmp_path / "knobs.json", centos)
    store.write("thp_defrag", b"never\n")
    assert store.read("thp_defrag") == b"always madvise [never]\n"
    with pytest.raises(knobs.KnobError):
        store.write("thp_defrag", b"defer\n")


def test_knob_store_persists(tmp_path: Path):
    store = knobs.KnobStore(tmp_path / "knobs.json")
    store.write("thp_enabled", b"never\n")
    assert knobs.KnobStore(tmp_path / "knobs.json").read("thp_enabled") == b"always madvise [never]\n"


def test_fault_params_are_typed():
    assert parse_params(["npu=3", "level=Alarm", "temp_c=96.5", "flag=true"]) == {
        "npu": 3, "level": "Alarm", "temp_c": 96.5, "flag": True}
    with pytest.raises(ConfigError):
        parse_params(["novalue"])


@pytest.mark.parametrize("argv", [["up", "2"], ["down"], ["status"], ["exec", "node01", "--", "true"],
                                  ["inventory"], ["run", "--", "true"], ["fault", "node01", "--clear"],
                                  ["base", "build"]])
def test_cli_without_root_says_so_and_exits_2(monkeypatch, argv):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    result = CliRunner().invoke(cli.main, argv)
    assert result.exit_code == 2
    assert "error: ascend-sim needs root" in result.output
    assert "Traceback" not in result.output


def test_cli_help_needs_no_root(monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    result = CliRunner().invoke(cli.main, ["up", "--help"])
    assert result.exit_code == 0 and "--profile" in result.output


def test_cli_profiles_lists_every_profile():
    result = CliRunner().invoke(cli.main, ["profiles"])
    assert result.exit_code == 0
    assert result.output.count("\n") == len(profiles.names())
    assert "a2-centos76\tatlas-800t-a2\tCentOS Linux 7.6.1810 (Core)" in result.output


def test_knob_fuse_protocol(tmp_path: Path):
    """The FUSE request handler, driven as the kernel would: init, lookup, read, write, bad write."""
    import errno
    import struct

    fs = knobs.KnobFs(knobs.KnobStore(tmp_path / "knobs.json"))
    init = fs.handle(knobs.FUSE_INIT, 0, struct.pack("<IIII", 7, 38, 131072, 0))
    assert len(init) == 64 and struct.unpack_from("<II", init) == (7, 31)
    entry = fs.handle(knobs.FUSE_LOOKUP, knobs.ROOT_ID, b"thp_enabled\0")
    nodeid = struct.unpack_from("<Q", entry)[0]
    with pytest.raises(OSError) as missing:
        fs.handle(knobs.FUSE_LOOKUP, knobs.ROOT_ID, b"swappiness\0")
    assert missing.value.errno == errno.ENOENT
    read_in = struct.pack("<QQIIQII", 0, 0, 4096, 0, 0, 0, 0)
    assert fs.handle(knobs.FUSE_READ, nodeid, read_in) == b"[always] madvise never\n"
    write_in = struct.pack("<QQIIQII", 0, 0, 6, 0, 0, 0, 0) + b"never\n"
    assert fs.handle(knobs.FUSE_WRITE, nodeid, write_in) == struct.pack("<II", 6, 0)
    assert fs.handle(knobs.FUSE_READ, nodeid, read_in) == b"always madvise [never]\n"
    bad = struct.pack("<QQIIQII", 0, 0, 4, 0, 0, 0, 0) + b"all\n"
    with pytest.raises(OSError) as invalid:
        fs.handle(knobs.FUSE_WRITE, nodeid, bad)
    assert invalid.value.errno == errno.EINVAL
    listing = fs.handle(knobs.FUSE_READDIR, knobs.ROOT_ID, read_in)
    assert all(name.encode() in listing for name in knobs.SPECS)


def test_run_expands_the_cluster_variables_in_its_arguments():
    # README: `ascend-sim run -- ascend-check -i '$ASCEND_SIM_INVENTORY'` (quoted: no shell expands it)
    from ascend_ready.sim.cli import expand_cluster_vars

    values = {"ASCEND_SIM_INVENTORY": "/run/x/inventory.ini", "ASCEND_SIM_RUN_DIR": "/run/x"}
    assert expand_cluster_vars(["ascend-check", "-i", "$ASCEND_SIM_INVENTORY", "${ASCEND_SIM_RUN_DIR}/s"],
                               values) == ["ascend-check", "-i", "/run/x/inventory.ini", "/run/x/s"]


def test_a_mount_point_keeps_the_mode_of_the_nodes_own_directories(tmp_path):
    """A checkout lent at /tmp/ci/main used to leave the node a /tmp of mode 0755, so a non-root login
    could not mktemp (ascend-check's batch as an SSH user without become ran into its host deadline)."""
    from ascend_ready.sim.cluster import mount_point

    lower, upper = tmp_path / "lower", tmp_path / "upper"
    (lower / "tmp").mkdir(parents=True)
    os.chmod(lower / "tmp", 0o1777)
    (lower / "root").mkdir()
    os.chmod(lower / "root", 0o700)
    upper.mkdir()
    made = mount_point(upper, lower, "/tmp/ci/main")
    assert made == upper / "tmp" / "ci" / "main" and made.is_dir()
    assert (upper / "tmp").stat().st_mode & 0o7777 == 0o1777
    assert (upper / "tmp" / "ci").stat().st_mode & 0o7777 != 0o1777  # not in the base: a plain directory
    mount_point(upper, lower, "/root/.pyenv/versions/3.11.7")
    assert (upper / "root").stat().st_mode & 0o7777 == 0o700


def test_the_checkout_is_lent_to_nodes_only_on_request(monkeypatch):
    """A job runs in the venv python_env built on each node, as on a real rack (issue 18): the controller's
    checkout and .venv go to the nodes only where ASCEND_SIM_LEND_CHECKOUT=1 asks (the simulator's tests)."""
    from ascend_ready.sim import cluster as sim

    monkeypatch.delenv("ASCEND_SIM_LEND_CHECKOUT", raising=False)
    monkeypatch.delenv("ASCEND_SIM_SHARED_FS", raising=False)
    assert sim.shared_fs_enabled() and sim.shared_checkout() == []
    monkeypatch.setenv("ASCEND_SIM_LEND_CHECKOUT", "1")
    lent = sim.shared_checkout()
    assert lent and (lent[0] / "pyproject.toml").is_file()
    monkeypatch.setenv("ASCEND_SIM_SHARED_FS", "0")
    assert sim.shared_checkout() == []


def test_a_host_bound_profile_is_each_nodes_own_check_profile(tmp_path):
    """write_inventory(check_profile=...) names it per host: a host variable beats the simulator's
    per-hardware group (ascend_check_profile=atlas-800t-a2 in inventory.ini) in Ansible and ascend-check."""
    import json

    import yaml

    from ascend_ready.checks.profile import load_profile
    from ascend_ready.sim.harness import fleet

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "cluster.json").write_text(json.dumps({"nodes": [
        {"name": "node01", "index": 1, "hardware": "atlas-800t-a2", "os": "ubuntu2204"}]}))
    (run_dir / "inventory.ini").write_text("[ascend_nodes]\nnode01\n")
    profile = fleet.host_bound_profile(tmp_path / "sim-profile.yml")
    assert load_profile(str(profile)).min_disk_free_gb == 1
    hosts = fleet.write_inventory(run_dir, tmp_path / "inv", tmp_path / "pkgs", "cann-8.2.RC1-torch-2.6.0",
                                  check_profile=profile)
    node = yaml.safe_load((hosts.parent / "host_vars" / "node01.yml").read_text())
    assert node["ascend_check_profile"] == str(profile)
    group = yaml.safe_load((hosts.parent / "group_vars/ascend_nodes.yml").read_text())
    assert "ascend_check_profile" not in group
