"""The knowledge base is valid data: every check id it names exists, every entry is cited, its examples
match, and the model refuses what it should (unknown fields, examples the patterns or the prefilter miss)."""

from __future__ import annotations

import copy

import pytest
import yaml

from ascend_ready.checks.diagnose import diagnose_paths, load_knowledge_base
from ascend_ready.checks.diagnose.model import CODES_FILE, KB_FILE, CodeBook, KnowledgeBase, load_code_book
from ascend_ready.checks.registry import all_checks
from ascend_ready.errors import ConfigError

KB = load_knowledge_base()


def test_every_check_id_exists():
    known = set(all_checks())
    unknown = {(e.id, c) for e in KB.entries for c in e.check_ids if c not in known}
    assert not unknown, f"not an `ascend-check list` id: {sorted(unknown)}"


def test_the_knowledge_base_covers_the_common_families():
    codes = {e.code for e in KB.entries}
    assert {"EI0006", "EI0002", "EI9999", "EE8888", "EE9999", "EZ9999", "E30006", "EL0004"} <= codes
    assert {"507033", "507035", "507899", "107001", "107002", "100000"} <= codes
    assert {"libhccl.so", "libascend_hal.so", "-8020", "-8005", "NPU out of memory", "set_env.sh"} <= codes
    assert "E39999" in KB.entries[[e.id for e in KB.entries].index("cann-inner-error")].examples
    assert len(KB.entries) >= 45


def test_every_entry_is_cited_and_has_what_the_report_needs():
    for e in KB.entries:
        assert e.sources and e.examples and e.causes and e.fix.strip(), e.id
        assert all(s.startswith("https://") or "#" in s or ":" in s for s in e.sources), e.id


def _raw() -> dict:
    return yaml.safe_load(KB_FILE.read_text())


def test_unknown_fields_are_refused():
    data = _raw()
    data["entries"][0]["severity"] = "high"
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        KnowledgeBase.model_validate(data)


def test_an_example_its_patterns_miss_is_refused():
    data = _raw()
    data["entries"][0]["examples"] = ["nothing to see here: rror"]
    with pytest.raises(ValueError, match="no pattern matches its example"):
        KnowledgeBase.model_validate(data)


def test_an_example_the_prefilter_skips_is_refused():
    data = copy.deepcopy(_raw())
    data["prefilter"] = ["ZZZ"]
    with pytest.raises(ValueError, match="the prefilter would skip its example"):
        KnowledgeBase.model_validate(data)


def test_an_uncited_entry_is_refused():
    data = _raw()
    data["entries"][0]["sources"] = ["a forum somewhere"]
    with pytest.raises(ValueError, match="not a URL or owner/repo#N"):
        KnowledgeBase.model_validate(data)


def test_a_broken_file_is_a_config_error_with_field_messages(tmp_path):
    data = _raw()
    del data["entries"][1]["fix"]
    path = tmp_path / "kb.yml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"entries\.1\.fix: Field required"):
        load_knowledge_base(path)


# ---------------------------------------------------------------- the vendor's code lists (codes.yml)

BOOK = load_code_book()


def test_the_code_lists_are_complete_and_cited():
    cann = {c for f in BOOK.cann for c in f.codes}
    acl = {c for f in BOOK.acl for c in f.codes}
    # the vendor's lists as extracted (hicann/runtime error_code.json + hicann/ge's registry; aclError)
    assert len(cann) >= 540 and len(acl) >= 250
    assert {"EI0002", "EI0006", "EJ0001", "EL0004", "EZ9999", "E30006", "EE1001", "E19999"} <= cann
    assert {"107001", "107020", "507033", "507034", "507035", "507053", "507899", "100000", "145000"} <= acl
    known = set(all_checks())
    for fam in (*BOOK.cann, *BOOK.acl):
        assert fam.sources and fam.causes and fam.fix and fam.meaning, fam.id
        assert set(fam.check_ids) <= known, fam.id


def test_every_documented_code_gets_a_finding_named_by_it(tmp_path):
    # one rank per line: a finding of one code cannot hide another's
    lines = BOOK.example_lines()
    path = tmp_path / "codes.log"
    path.write_text("".join(f"[rank{i}]: {line}\n" for i, (_code, line) in enumerate(lines)))
    found: dict[int, set[str]] = {}
    for f in diagnose_paths([path]).findings:
        found.setdefault(f.rank, set()).add(f.code)
    missed = [(code, line) for i, (code, line) in enumerate(lines) if code not in found.get(i, set())]
    assert not missed, missed[:10]
    assert len(lines) > 1000


def test_a_code_book_with_a_code_outside_its_family_is_refused():
    data = yaml.safe_load(CODES_FILE.read_text())
    data["cann"][0]["codes"]["EI0001"] = "Misfiled"
    with pytest.raises(ValueError, match="is not one of its codes"):
        CodeBook.model_validate(data)
    data = yaml.safe_load(CODES_FILE.read_text())
    data["acl"][1]["prefixes"].append(data["acl"][0]["prefixes"][0])
    with pytest.raises(ValueError, match="is already"):
        CodeBook.model_validate(data)


def test_every_hccl_result_is_named(tmp_path):
    # verl-project/verl#3947's line shape, with each HcclResult in turn
    codes = BOOK.hccl_results.codes
    path = tmp_path / "hccl.log"
    path.write_text("".join(
        f"[rank{n}]: RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:102 HCCL "
        f"function error: hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), "
        f"error code is {n}\n" for n in codes
    ))
    titles = {f.rank: f.title for f in diagnose_paths([path]).findings}
    assert all(titles[int(n)] == f"HCCL call hcclCommInitRootInfoConfig failed (error code {n} = {name})"
               for n, name in codes.items()), titles
