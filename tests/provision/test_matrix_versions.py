"""Version ordering and matching used by the matrix (Ascend, CANN, firmware, torch, torch_npu)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ascend_ready.provision.matrix import (
    base_version,
    python_minor,
    same_version,
    version_has_prefix,
    version_key,
)

ASCEND_ORDER = ["23.0.rc3", "23.0.0", "24.1.rc1", "24.1.RC2", "24.1.0", "25.0.rc1", "25.0.rc1.1",
                "25.5.0.b061", "25.5.0", "25.5.1", "26.0.rc1"]
CANN_ORDER = ["7.0.RC1", "7.0.0", "8.0.RC1", "8.0.rc3", "8.0.0", "8.1.RC1", "8.2.RC1", "8.3.RC1", "8.5.0",
              "9.0.0"]
NPU_ORDER = ["2.1.0.rc1", "2.1.0", "2.1.0.post8.dev20241009", "2.1.0.post8", "2.1.0.post10", "2.1.0.post17",
             "2.2.0"]


@pytest.mark.parametrize("ordered", [ASCEND_ORDER, CANN_ORDER, NPU_ORDER], ids=["hdk", "cann", "torch_npu"])
def test_known_orders(ordered):
    assert sorted(reversed(ordered), key=version_key) == ordered


def test_rc_is_case_insensitive_and_local_tag_ignored():
    assert same_version("8.2.RC1", "8.2.rc1")
    assert same_version("2.1.0+cpu", "2.1.0")
    assert same_version("8.0.0", "8.0.0.0")
    assert not same_version("24.1.rc2", "24.1.rc2.1")


@pytest.mark.parametrize("bad", ["", "x.1", "8.x", "8.0.RCa", "2.1.0-post1", "v8.0.0", "8..0"])
def test_bad_versions_raise(bad):
    with pytest.raises(ValueError, match="bad version"):
        version_key(bad)


@pytest.mark.parametrize(("version", "prefix", "expected"), [
    ("25.5.1", "25.5", True),
    ("25.5.0.b061", "25.5", True),
    ("24.1.rc2.1", "24.1.rc2", True),
    ("24.1.RC3", "24.1.rc2", False),
    ("25.50.1", "25.5", False),
    ("26.0.rc1", "26.0.RC1", True),
])
def test_prefix_matching(version, prefix, expected):
    assert version_has_prefix(version, prefix) is expected


@pytest.mark.parametrize(("npu", "torch"), [("2.1.0.post10", "2.1.0"), ("2.9.0", "2.9.0"),
                                            ("1.11.0.post8", "1.11.0"), ("2.1.0.rc1", "2.1.0"),
                                            ("2.1.0.post8.dev20241009", "2.1.0")])
def test_base_version(npu, torch):
    assert base_version(npu) == torch


def test_python_minor():
    assert python_minor("3.10.13") == "3.10"
    assert python_minor("python3.11") == "3.11"
    with pytest.raises(ValueError, match="bad Python version"):
        python_minor("3")


@given(st.lists(st.integers(0, 300), min_size=1, max_size=6), st.integers(1, 30))
def test_rc_sorts_below_release_and_post_above(nums, n):
    release = ".".join(map(str, nums))
    assert version_key(f"{release}.rc{n}") < version_key(release) < version_key(f"{release}.post{n}")
    assert version_key(f"{release}.post{n}") < version_key(f"{release}.post{n + 1}")
