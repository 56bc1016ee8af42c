"""Carry MindCluster ascend-fd's open knowledge graph over into checks/diagnose/vendor_kg.yml (issue 31).

The graph (Ascend/mind-cluster, component/ascend-faultdiag/src/ascend_fd/configuration/kg-config.json) names
about 1,050 fault entities, each with the log keywords or regex that find it and the entities it leads to.
The codes, keywords and links are facts and are carried over as they are, with their source; the causes and
fixes are not: every entity gets the causes, fix and preflight checks of one of our families, written in our
words in the `families:` section of vendor_kg.yml (kept as it is by this script). Only the entities of logs a
training or serving host writes are carried (the job's output, CANN plogs, MindIE and vLLM logs, the host
OS and its kernel log, container runtime); switch, BMC, device-OS and Kubernetes logs are not read by
`ascend-check diagnose`.

    python3 scripts/import_ascend_fd_kg.py KG_CONFIG_JSON [--commit SHA]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parent.parent / "checks/diagnose/vendor_kg.yml"
SOURCE = "Ascend/mind-cluster:component/ascend-faultdiag/src/ascend_fd/configuration/kg-config.json"

HOST_LOGS = {
    "TrainLog", "CANN_Plog", "CANN_Plog | OS", "CANN_Device", "MindIE", "PyMotor_vLLM_Log", "OS", "OS-dmesg",
    "OS-vmcore-dmesg", "NPU_Host", "DL_Docker_Runtime", "MindIO",
}

# (component, module) -> our family; a component alone is the default for its modules
FAMILY = {
    ("CANN", "DRV"): "driver", ("CANN", "Drv"): "driver", ("CANN", "RUNTIME/DRV"): "driver",
    ("NPU", "DRIVER"): "driver", ("CANN", "TSD"): "driver",
    ("CANN", "RUNTIME"): "runtime", ("CANN", "ACL"): "runtime", ("CANN", "CCE"): "runtime",
    ("CANN", "任务调度"): "runtime", ("CANN", "GetNext"): "runtime", ("CANN", "Profiling"): "runtime",
    ("CANN", "CANN"): "runtime",
    ("CANN", "HCCL"): "hccl", ("CANN", "HCCP"): "hccl", ("CANN", "集合通信"): "hccl", ("CANN", "MC2"): "hccl",
    ("CANN", "URMA"): "hccl",
    ("CANN", "GE"): "operator", ("CANN", "AICPU"): "operator", ("CANN", "TBE"): "operator",
    ("AI Framework", "CANN"): "operator", ("AI Framework", "CANN/Framework"): "operator",
    ("CANN", "DVPP"): "dvpp",
    ("HostOS", None): "host-os", ("NPU", "OS"): "host-os",
    ("MindIE", None): "mindie", ("MINDIE", None): "mindie", ("PYMOTOR", None): "mindie",
    ("VLLM", None): "vllm", ("VLLM-ASCEND", None): "vllm",
    ("AI Framework", None): "framework",
    ("UB", None): "ub",
    ("MindX", None): "mindx",
}


def family_of(attr: dict) -> str | None:
    comp, mod = attr.get("component"), attr.get("module")
    return FAMILY.get((comp, mod)) or FAMILY.get((comp, None))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kg_config")
    ap.add_argument("--commit", default="", help="the mind-cluster commit the file was read at")
    args = ap.parse_args(argv)
    graph = json.loads(Path(args.kg_config).read_text(encoding="utf-8"))["knowledge-repository"]
    current = yaml.safe_load(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
    families = current.get("families") or {}
    entities, skipped = [], {"other log": 0, "multi-line rule": 0, "no pattern": 0, "no family": 0}
    for code, ent in graph.items():
        if ent.get("source_file") not in HOST_LOGS:
            skipped["other log"] += 1
            continue
        rx = ent.get("regex") or {}
        if "opt" in rx and not rx.get("in") and not rx.get("regex"):
            skipped["multi-line rule"] += 1  # keywords over several lines: not one line's match
            continue
        groups = rx.get("in") or []
        if groups and isinstance(groups[0], str):
            groups = [groups]
        if not groups and not rx.get("regex"):
            skipped["no pattern"] += 1
            continue
        fam = family_of(ent.get("attribute") or {})
        if fam is None or fam not in families:
            skipped["no family"] += 1
            continue
        row = {"code": code, "family": fam, "log": ent["source_file"]}
        if groups:
            row["in"] = [list(g) for g in groups if g]
        if rx.get("regex"):
            row["regex"] = rx["regex"]
        leads = [r["dst_code"] for r in ent.get("rule") or [] if r.get("dst_code")]
        if leads:
            row["leads_to"] = leads
        entities.append(row)
    doc = {
        "schema_version": 1,
        "source": SOURCE,
        "commit": args.commit or current.get("commit", ""),
        "families": families,
        "entities": entities,
    }
    header = (OUT.read_text(encoding="utf-8").split("\nschema_version:")[0] + "\n") if OUT.exists() else ""
    OUT.write_text(header + yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=110),
                   encoding="utf-8")
    print(f"{len(entities)} entities carried, skipped: {skipped}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
