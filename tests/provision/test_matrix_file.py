"""The real provision/matrix.yml: official rows present, and every invalid variant refused by name."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from ascend_ready.errors import MatrixError
from ascend_ready.provision.matrix import MATRIX_PATH, load_matrix, matrix_json_schema, parse_matrix

SCHEMA_FILE = MATRIX_PATH.parent / "schema" / "matrix.schema.json"
REQUIRED_CANN = ["7.0.0", "8.0.0", "8.1.RC1", "8.2.RC1", "8.3.RC1", "8.5.0", "9.0.0"]


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


@pytest.fixture
def raw():
    """The real file as plain data, to mutate into invalid variants."""
    return yaml.safe_load(MATRIX_PATH.read_text())


def parse(data) -> object:
    return parse_matrix(yaml.safe_dump(data, sort_keys=False), origin="variant.yml")


def stack_index(data, stack_id: str) -> int:
    return next(i for i, s in enumerate(data["stacks"]) if s["id"] == stack_id)


def test_required_cann_releases_present(matrix):
    assert [c.version for c in matrix.cann] == REQUIRED_CANN


@pytest.mark.parametrize(("cann", "npu_releases"), [
    ("7.0.0", {"2.1.0", "2.0.1.post1", "1.11.0.post8"}),
    ("8.0.0", {"2.4.0.post2", "2.3.1.post4", "2.1.0.post10"}),
    ("8.1.RC1", {"2.5.1", "2.4.0.post4", "2.3.1.post6", "2.1.0.post12"}),
    ("8.2.RC1", {"2.6.0", "2.5.1.post1", "2.1.0.post13"}),
    ("8.3.RC1", {"2.8.0", "2.7.1", "2.6.0.post3", "2.1.0.post17"}),
    ("8.5.0", {"2.9.0", "2.8.0.post2", "2.7.1.post2", "2.6.0.post5"}),
    ("9.0.0", {"2.9.0.post2", "2.8.0.post4", "2.7.1.post4"}),
])
def test_every_official_torch_npu_row_present(matrix, cann, npu_releases):
    assert {s.torch_npu for s in matrix.stacks_for(cann)} == npu_releases


def test_one_recommended_row_per_cann_and_it_is_the_newest_torch(matrix):
    for c in matrix.cann:
        rows = matrix.stacks_for(c.version)
        rec = [s for s in rows if s.recommended]
        assert len(rec) == 1, c.version
        assert rec[0].torch == max((s.torch for s in rows), key=lambda v: tuple(map(int, v.split("."))))


def test_glibc_floors_follow_the_torch_2_6_switch(matrix):
    floors = {s.id: s.glibc for s in matrix.stacks}
    assert floors["cann-8.2.RC1-torch-2.5.1"] == "2.17"
    assert floors["cann-8.2.RC1-torch-2.6.0"] == "2.28"
    assert floors["cann-9.0.0-torch-2.9.0"] == "2.28"
    assert matrix.os_entry("centos7.6").glibc == "2.17"


def test_hdk_firmware_is_per_product(matrix):
    assert matrix.hdk_release("24.1.RC2").products["910b"].firmware == "7.3.0.1.231"
    assert matrix.hdk_release("23.0.3").products["910b"].firmware == "7.1.0.5.220"
    assert matrix.hdk_release("23.0.2.1").products["310p"].firmware == "7.1.0.4.220"


def test_cann_8_5_layout(matrix):
    lay = matrix.layout(matrix.cann_release("8.5.0").layout)
    assert (lay.install_root, lay.op_package, lay.nnae) == ("/usr/local/Ascend/cann-{cann}", "ops", False)
    legacy = matrix.layout(matrix.cann_release("8.3.RC1").layout)
    assert (legacy.op_package, legacy.nnae) == ("kernels", True)


def test_every_source_cited_exists(matrix):
    cited = {o.source for o in matrix.os} | {p.source for p in matrix.products}
    cited |= {h.source for h in matrix.hdk}
    cited |= {sid for c in matrix.cann for sid in c.sources}
    assert cited <= set(matrix.sources)


def test_exported_schema_is_current():
    assert json.loads(SCHEMA_FILE.read_text()) == matrix_json_schema(), "re-export: ascend-matrix schema"


# ---- invalid variants: each names the row and the field ---------------------------------------------

def test_unknown_key_named(raw):
    raw["stacks"][stack_index(raw, "cann-8.0.0-torch-2.1.0")]["torchnpu"] = "2.1.0.post10"
    with pytest.raises(MatrixError,
                       match=r"stacks\[\d+\] \(cann-8\.0\.0-torch-2\.1\.0\)\.torchnpu: unknown key"):
        parse(raw)


def test_unknown_top_level_key_named(raw):
    raw["stack"] = []
    with pytest.raises(MatrixError, match=r"stack: unknown key"):
        parse(raw)


def test_duplicate_stack_named(raw):
    i = stack_index(raw, "cann-8.0.0-torch-2.1.0")
    raw["stacks"].append(copy.deepcopy(raw["stacks"][i]))
    pattern = r"stacks\[\d+\] \(cann-8\.0\.0-torch-2\.1\.0\): duplicate of stacks\[" + str(i) + r"\]"
    with pytest.raises(MatrixError, match=pattern):
        parse(raw)


def test_duplicate_torch_npu_release_under_other_id(raw):
    row = copy.deepcopy(raw["stacks"][stack_index(raw, "cann-8.0.0-torch-2.1.0")])
    row["id"] = "cann-8.0.0-torch-2.1.0-again"
    raw["stacks"].append(row)
    with pytest.raises(MatrixError, match=r"duplicate of stacks"):
        parse(raw)


def test_duplicate_yaml_key_named():
    text = MATRIX_PATH.read_text().replace("schema_version: 1\n", "schema_version: 1\nschema_version: 1\n", 1)
    with pytest.raises(MatrixError, match=r"line \d+: duplicate key 'schema_version'"):
        parse_matrix(text)


def test_torch_mismatch_named(raw):
    raw["stacks"][stack_index(raw, "cann-8.0.0-torch-2.1.0")]["torch_npu"] = "2.2.0.post10"
    with pytest.raises(MatrixError, match=r"stacks\[\d+\] \(cann-8\.0\.0-torch-2\.1\.0\)\.torch_npu: "
                                          r"torch_npu 2\.2\.0\.post10 is built for torch 2\.2\.0, "
                                          r"not torch 2\.1\.0"):
        parse(raw)


def test_unknown_os_named(raw):
    raw["cann"][1]["os"] = ["centos7.6", "ubuntu99.04"]
    with pytest.raises(MatrixError, match=r"cann\[1\] \(8\.0\.0\)\.os: unknown OS 'ubuntu99\.04'"):
        parse(raw)


def test_bad_version_named(raw):
    raw["stacks"][stack_index(raw, "cann-8.5.0-torch-2.9.0")]["torch_npu"] = "2.9.0-post1"
    with pytest.raises(MatrixError, match=r"stacks\[\d+\] \(cann-8\.5\.0-torch-2\.9\.0\)\.torch_npu: "
                                          r".*bad version '2\.9\.0-post1'"):
        parse(raw)


def test_unknown_cann_in_stack_named(raw):
    row = raw["stacks"][stack_index(raw, "cann-9.0.0-torch-2.9.0")]
    row["cann"], row["id"] = "9.9.0", "cann-9.9.0-torch-2.9.0"
    with pytest.raises(MatrixError, match=r"\(cann-9\.9\.0-torch-2\.9\.0\)\.cann: unknown CANN '9\.9\.0'"):
        parse(raw)


def test_unknown_hdk_named(raw):
    raw["cann"][1]["hdk"]["recommended"]["910b"] = "24.9.RC9"
    with pytest.raises(MatrixError, match=r"cann\[1\] \(8\.0\.0\)\.hdk\.recommended\.910b: unknown HDK"):
        parse(raw)


def test_recommended_driver_outside_compatible_named(raw):
    raw["cann"][1]["hdk"]["compatible"] = ["25.0"]
    with pytest.raises(MatrixError, match=r"8\.0\.0\)\.hdk\.recommended\.910b: driver 24\.1\.rc2 is outside"):
        parse(raw)


def test_low_glibc_claim_for_new_torch_named(raw):
    raw["stacks"][stack_index(raw, "cann-8.2.RC1-torch-2.6.0")]["manylinux"] = "manylinux2014"
    with pytest.raises(MatrixError, match=r"\(cann-8\.2\.RC1-torch-2\.6\.0\)\.manylinux: "
                                          r"torch 2\.6\.0 wheels are manylinux_2_28"):
        parse(raw)


def test_missing_key_named(raw):
    del raw["os"][0]["glibc"]
    with pytest.raises(MatrixError, match=r"os\[0\] \(centos7\.6\)\.glibc: required key is missing"):
        parse(raw)


def test_unknown_source_named(raw):
    raw["hdk"][0]["source"] = "nowhere"
    with pytest.raises(MatrixError, match=r"hdk\[0\] \(23\.0\.3\)\.source: unknown source 'nowhere'"):
        parse(raw)


def test_errors_carry_a_hint(raw):
    raw["stacks"][0]["extra"] = 1
    with pytest.raises(MatrixError) as info:
        parse(raw)
    assert info.value.hint and "ascend-matrix schema" in info.value.hint
