"""RL engine rows of the matrix: resolve --engine, and refusing a fleet the engine does not support."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ascend_ready.errors import MatrixError
from ascend_ready.provision.cli import main
from ascend_ready.provision.engines import check_engine_fleet, check_engine_versions
from ascend_ready.provision.matrix import MATRIX_PATH, load_matrix, parse_matrix
from ascend_ready.provision.resolver import resolve
from ascend_ready.provision.versions import clauses_hold


def test_every_engine_row_names_its_source_and_a_known_stack():
    m = load_matrix()
    assert {e.engine for e in m.engines} == {"verl", "vllm-ascend", "mindspeed-rl"}
    for row in m.engines:
        assert row.source in m.sources
        assert any(clauses_hold(row.cann, s.cann) and clauses_hold(row.torch, s.torch)
                   and clauses_hold(row.torch_npu, s.torch_npu) for s in m.stacks), row.id


def test_resolve_engine_verl_picks_the_stack_verl_docs_pin():
    r = resolve(load_matrix(), engine="verl")
    assert (r.cann, r.torch, r.torch_npu) == ("8.3.RC1", "2.7.1", "2.7.1")
    assert r.python in ("3.10", "3.11")
    assert r.engine.rows == ["verl-0.9.1", "vllm-ascend-0.11.0rc1"]
    assert r.engine.companions["vllm-ascend"] == "0.11.0rc1"
    assert resolve(load_matrix(), engine="mindspeed-rl").cann == "8.1.RC1"


def test_resolve_engine_names_the_pin_that_rules_it_out():
    with pytest.raises(MatrixError) as exc:
        resolve(load_matrix(), engine="verl", cann="8.5.0")
    assert "engine verl rules out" in exc.value.message
    assert "cann-8.3.RC1-torch-2.7.1" in exc.value.hint


def test_fleet_outside_the_engine_is_refused_naming_each_node():
    good = {"cann": "8.3.RC1", "torch": "2.7.1", "torch_npu": "2.7.1"}
    assert check_engine_fleet("verl", {"node01": good})["node01"][0] == "verl-0.9.1"
    with pytest.raises(MatrixError) as exc:
        check_engine_fleet("verl", {"node01": good,
                                    "node02": {"cann": "8.5.0", "torch": "2.9.0", "torch_npu": "2.9.0"},
                                    "node03": {"cann": "8.3.RC1", "torch": None, "torch_npu": "2.7.1"}})
    assert "node02: CANN 8.5.0, torch 2.9.0, torch_npu 2.9.0" in exc.value.message
    assert "node03: torch not read" in exc.value.message
    assert "node01" not in exc.value.message
    assert "CANN 8.3.RC1 / torch 2.7.1 / torch_npu 2.7.1" in exc.value.hint


def test_a_verl_row_must_name_an_existing_vllm_ascend_release():
    text = MATRIX_PATH.read_text().replace('vllm-ascend: "0.11.0rc1", triton',
                                           'vllm-ascend: "0.99.0", triton')
    with pytest.raises(MatrixError, match=r"engines\[0\] \(verl-0.9.1\)\.companions: no vllm-ascend row"):
        parse_matrix(text)
    with pytest.raises(MatrixError, match="bad version clause"):
        parse_matrix(MATRIX_PATH.read_text().replace('cann: ["==8.3.RC1"]', 'cann: ["~8.3.RC1"]'))


def test_cli_resolve_engine_table_and_json():
    runner = CliRunner()
    table = runner.invoke(main, ["resolve", "--engine", "verl"])
    assert table.exit_code == 0, table.output
    assert "engine: verl" in table.output and "vllm-ascend-0.11.0rc1" in table.output
    data = json.loads(runner.invoke(main, ["resolve", "--engine", "verl", "--format", "json"]).output)
    assert data["torch_npu"] == "2.7.1" and data["engine"]["engine"] == "verl"
    bad = runner.invoke(main, ["resolve", "--engine", "verl", "--cann", "8.5.0"])
    assert bad.exit_code == 2 and "engine verl rules out" in bad.output


def test_the_verl_row_pins_verl_vllm_ascend_and_megatron_core_and_resolve_prints_them():
    r = resolve(load_matrix(), engine="verl")
    assert {k: r.engine.companions[k] for k in ("verl", "vllm-ascend", "megatron-core")} == {
        "verl": "0.9.1", "vllm-ascend": "0.11.0rc1", "megatron-core": "0.12.1"}
    table = CliRunner().invoke(main, ["resolve", "--engine", "verl"])
    for line in ("with verl", "with vllm-ascend", "with megatron-core"):
        assert line in table.output, table.output
    assert "0.9.1" in table.output and "0.12.1" in table.output


def test_nodes_running_other_engine_releases_are_refused_naming_node_and_package():
    good = {"cann": "8.3.RC1", "torch": "2.7.1", "torch_npu": "2.7.1"}
    rows = check_engine_fleet("verl", {"node01": good, "node02": good})
    pinned = {"verl": "0.9.1", "vllm": "0.11.0", "vllm-ascend": "0.11.0rc1", "megatron-core": "0.12.1",
              "triton-ascend": "3.2.0rc4", "torchvision": "0.22.1", "transformers": "5.9.0",
              "transferqueue": "0.1.11", "megatron-bridge": "0.5.2"}
    check_engine_versions("verl", rows, {"node01": pinned, "node02": {**pinned, "torchvision": "0.22.1+cpu"}})
    with pytest.raises(MatrixError) as exc:
        check_engine_versions("verl", rows, {"node01": pinned,
                                             "node02": {**pinned, "vllm-ascend": "0.10.0rc1", "verl": None}})
    assert "node02: vllm-ascend 0.10.0rc1, not 0.11.0rc1" in exc.value.message
    assert "node02: verl not installed (pinned 0.9.1)" in exc.value.message
    assert "node01" not in exc.value.message and "verl==0.9.1" in exc.value.hint
    # an fsdp job does not load megatron-core: its absence is no reason to refuse
    check_engine_versions("verl", rows, {"node01": pinned, "node02": {**pinned, "megatron-core": None}},
                          skip=("megatron-core",))


def test_the_verl_rows_pins_satisfy_verls_own_metadata():
    """Issue 28: transformers, TransferQueue and Megatron-Bridge as verl 0.9.1's wheel requires them."""
    import importlib.metadata

    from packaging.requirements import Requirement

    from ascend_ready.provision.matrix import load_matrix

    try:
        requires = importlib.metadata.distribution("verl").requires or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("verl is not installed")
    row = next(r for r in load_matrix().engines if r.id == "verl-0.9.1")
    wanted = {"transformers", "transferqueue", "megatron-bridge"}
    checked = set()
    for line in requires:
        req = Requirement(line)
        name = req.name.lower()
        # the base range and every extra's pin (verl[vllm]: transformers==5.9.0)
        if name in wanted and name in row.companions and req.specifier:
            pin = row.companions[name]
            assert req.specifier.contains(pin, prereleases=True), (line, pin)
            checked.add(name)
    assert checked == wanted
