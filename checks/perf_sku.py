"""Expected performance per Ascend SKU (checks/profiles/sku_perf.yml) and the judge every performance check
shares: a device below its absolute floor fails naming it, one more than 10 % below the fleet median warns,
and the verdict says which of the two binds, with measured, expected, % of peak, the floor and its source.

The SKU is the chip name `npu-smi info` prints (`910B3`, `Ascend910` on A3, `310P3`), never assumed: a chip
the file does not name gets no absolute floor and is judged against the fleet alone (and says so).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_ready.errors import ConfigError

__all__ = [
    "SKU_FILE",
    "Fraction",
    "Metric",
    "Sku",
    "SkuPerf",
    "Verdict",
    "expected_for",
    "judge",
    "load_sku_perf",
    "sku_for_chip",
]

SKU_FILE = Path(__file__).resolve().parent / "profiles" / "sku_perf.yml"

#: what a performance check measures, and the unit it is in
Metric = Literal["matmul", "hbm", "h2d", "d2h", "p2p", "allreduce_node"]
UNITS: dict[str, str] = {"matmul": "TFLOPS", "hbm": "GB/s", "h2d": "GB/s", "d2h": "GB/s", "p2p": "GB/s",
                         "allreduce_node": "GB/s"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Fraction(_Model):
    value: float = Field(gt=0, le=1, description="fraction of the expected figure a healthy device reaches")
    source: str = Field(description="where the fraction comes from")


class Pcie(_Model):
    gen: int = Field(ge=1, le=6)
    width: int = Field(ge=1, le=32)
    gbps_per_direction: float = Field(gt=0, description="GB/s a link of this generation and width carries")


class Hccs(_Model):
    links: int = Field(ge=1)
    gbps_per_link: float = Field(gt=0)
    topology: str


class Sku(_Model):
    """One SKU's published figures, each with its source."""

    chip_names: list[str] = Field(min_length=1, description="chip names npu-smi prints for this SKU")
    product: str
    cube_cores: int = Field(ge=1)
    peak_tflops_fp16: float = Field(gt=0, description="dense FP16 cube peak per chip (die)")
    peak_tflops_bf16: float | None = Field(
        None, gt=0, description="dense BF16 cube peak per chip (null: none)")
    peak_source: str
    hbm_gbps: float = Field(gt=0, description="device memory bandwidth per chip, nominal")
    hbm_source: str
    pcie: Pcie
    pcie_source: str
    host_link_expected_gbps: float | None = Field(
        None, gt=0, description="host-device copy figure where it is not the PCIe link's (A3: HCCS plane)")
    hccs: Hccs | None = None
    hccs_source: str
    nic_gbps: float | None = Field(None, gt=0, description="device NIC line rate, Gb/s")
    nic_source: str
    allreduce_node_busbw_gbps: float | None = Field(None, gt=0)
    allreduce_node_source: str


class SkuPerf(_Model):
    """checks/profiles/sku_perf.yml."""

    version: Literal[1]
    fractions: dict[Literal["matmul", "hbm", "host_link", "p2p", "allreduce_node", "fleet_warn"], Fraction]
    skus: dict[str, Sku]


@lru_cache(maxsize=4)
def load_sku_perf(path: Path = SKU_FILE) -> SkuPerf:
    try:
        data = yaml.safe_load(Path(path).read_text())
        return SkuPerf.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the SKU performance file {path}: {exc}",
                          hint="reinstall ascend-ready (the file ships in checks/profiles/)") from None
    except ValidationError as exc:
        raise ConfigError(f"invalid SKU performance file {path}: {exc.errors()[0]['msg']} at "
                          f"{'.'.join(str(x) for x in exc.errors()[0]['loc'])}",
                          hint="fix the file; every figure needs its source") from None


def sku_for_chip(chip_name: str, perf: SkuPerf | None = None) -> tuple[str, Sku] | None:
    """(SKU id, figures) of the chip name npu-smi printed (`910B3`, `Ascend 910B3`, `Ascend910`), or None."""
    perf = perf or load_sku_perf()
    name = chip_name.strip()
    for candidate in (name, name.removeprefix("Ascend").strip(), name.replace(" ", "")):
        for sku_id, sku in perf.skus.items():
            if candidate in sku.chip_names:
                return sku_id, sku
    return None


@dataclass(frozen=True)
class Expected:
    """What a device of a SKU should measure for one metric, and the floor below which it fails."""

    sku: str
    expected: float
    fraction: float
    floor: float
    source: str  # where the expected figure comes from
    fraction_source: str

    @property
    def how(self) -> str:
        return f"{self.fraction:g} x {self.expected:g} expected for {self.sku}"


def expected_for(sku_id: str, sku: Sku, metric: Metric, *, dtype: str = "bf16", link_width: int | None = None,
                 perf: SkuPerf | None = None) -> Expected | None:
    """The expected figure and floor of `metric` on `sku` (None where the file has none: fleet only).

    `link_width`: the width the profile requires (h2d/d2h scale with it; a link that trained narrower
    then reads below the floor, as it should)."""
    perf = perf or load_sku_perf()
    fr = perf.fractions
    if metric == "matmul":
        peak = sku.peak_tflops_bf16 if dtype == "bf16" else sku.peak_tflops_fp16
        if peak is None:
            return None
        f = fr["matmul"]
        return Expected(sku_id, peak, f.value, round(f.value * peak, 1), sku.peak_source, f.source)
    if metric == "hbm":
        f = fr["hbm"]
        exp = sku.hbm_gbps
        return Expected(sku_id, exp, f.value, round(f.value * exp, 1), sku.hbm_source, f.source)
    if metric in ("h2d", "d2h"):
        f = fr["host_link"]
        if sku.host_link_expected_gbps is not None:
            exp = sku.host_link_expected_gbps
        else:
            width = link_width or sku.pcie.width
            exp = sku.pcie.gbps_per_direction * width / sku.pcie.width
        return Expected(sku_id, round(exp, 1), f.value, round(f.value * exp, 1), sku.pcie_source, f.source)
    if metric == "p2p":
        if sku.hccs is None:
            return None
        f = fr["p2p"]
        exp = sku.hccs.gbps_per_link
        return Expected(sku_id, exp, f.value, round(f.value * exp, 1), sku.hccs_source, f.source)
    if metric == "allreduce_node":
        if sku.allreduce_node_busbw_gbps is None:
            return None
        f = fr["allreduce_node"]
        exp = sku.allreduce_node_busbw_gbps
        return Expected(sku_id, exp, f.value, round(f.value * exp, 1), sku.allreduce_node_source, f.source)
    raise ValueError(f"unknown metric {metric!r}")


Status = Literal["pass", "warn", "fail"]


@dataclass(frozen=True)
class Verdict:
    """One device's (or pair's) measurement judged against its floor and the fleet median."""

    subject: str
    measured: float
    unit: str
    expected: Expected | None
    fleet_median: float | None
    fleet_ratio: float
    status: Status
    binds: str  # "the absolute floor", "the fleet median", "both", "" (pass)

    @property
    def pct_of_expected(self) -> float | None:
        return None if self.expected is None else 100.0 * self.measured / self.expected.expected

    def line(self) -> str:
        u = self.unit
        parts = [f"{self.subject}: measured {self.measured:.4g} {u}"]
        e = self.expected
        if e is not None:
            parts.append(f"expected {e.expected:g} {u} ({self.pct_of_expected:.0f} % of it)")
            parts.append(f"floor {e.floor:g} {u} ({e.how}; source: {e.source})")
        else:
            parts.append("no expected figure for this SKU (judged against the fleet only)")
        if self.fleet_median is not None:
            parts.append(f"fleet median {self.fleet_median:.4g} {u}")
        verb = "bind" if self.binds.startswith("both") else "binds"
        return ", ".join(parts) + f": {self.status}" + (f" ({self.binds} {verb})" if self.binds else "")

    def problem(self) -> str:
        e = self.expected
        if self.status == "fail":
            return (f"{self.subject}: {self.measured:.4g} {self.unit}, below its floor {e.floor:g} "
                    f"{self.unit} ({e.how})" if e else f"{self.subject}: {self.measured:.4g} {self.unit}")
        off = 100 * (1 - self.fleet_ratio)
        return (f"{self.subject}: {self.measured:.4g} {self.unit}, more than {off:.0f} % below the fleet "
                f"median {self.fleet_median:.4g} {self.unit}")


def judge(values: dict[str, float], *, unit: str, expected: Expected | None, fleet: list[float],
          fleet_ratio: float | None = None) -> list[Verdict]:
    """Each subject's verdict: below `expected.floor` fails (the floor binds); above it but below
    `fleet_ratio` x the median of `fleet` (every device of the run, this host's included) warns."""
    ratio = fleet_ratio if fleet_ratio is not None else load_sku_perf().fractions["fleet_warn"].value
    median = statistics.median(fleet) if len(fleet) >= 2 else None
    out = []
    for subject, v in values.items():
        below_floor = expected is not None and v < expected.floor
        below_fleet = median is not None and v < ratio * median
        if below_floor:
            status: Status = "fail"
            binds = "both the absolute floor and the fleet median" if below_fleet else "the absolute floor"
        elif below_fleet:
            status, binds = "warn", "the fleet median"
        else:
            status, binds = "pass", ""
        out.append(Verdict(subject, v, unit, expected, median, ratio, status, binds))
    return out
