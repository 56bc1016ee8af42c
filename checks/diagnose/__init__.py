"""`ascend-check diagnose`: why a run failed, from its logs, CANN plogs and dmesg output.

The knowledge base (signatures.yml) and the vendor's code lists (codes.yml) are data; scan.py streams the
logs against them; nothing is sent anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascend_ready.checks.diagnose.model import (
    CodeBook,
    DiagnoseReport,
    Evidence,
    Finding,
    KnowledgeBase,
    json_schema,
    load_code_book,
    load_knowledge_base,
)
from ascend_ready.checks.diagnose.render import explain_failure, render_json, render_table, render_text
from ascend_ready.checks.diagnose.scan import Scanner, diagnose_paths

__all__ = [
    "PLOG_REQUEST",
    "CodeBook",
    "DiagnoseReport",
    "Evidence",
    "Finding",
    "KnowledgeBase",
    "Scanner",
    "diagnose_paths",
    "explain_failure",
    "json_schema",
    "load_code_book",
    "load_knowledge_base",
    "render_json",
    "render_table",
    "render_text",
]


@dataclass(frozen=True)
class _ProbeRequest:
    """Probes a snapshot carries for `diagnose` rather than for a check (`collect --plogs`); the
    collection reads only `.probes` of what it is given."""

    probes: tuple[str, ...]


PLOG_REQUEST = _ProbeRequest(probes=("plogs",))
