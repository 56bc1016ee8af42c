"""Performance resources (full tier): Ascend DMI's FLOPS, bandwidth and P2P tests per device, and the SKU the
node's chips are (`npu-smi info` names them; checks/profiles/sku_perf.yml gives their expected figures).

`ascend-dmi` is the MindCluster ToolBox's tool (installed under /usr/local/Ascend/toolbox, with its own
set_env.sh): the probes source that script when it exists, so a node where the toolbox was installed by
the provisioning (or by hand) runs it; where it is missing the probes exit 127 and the checks say so.
Each test holds its device: they run one after the other (the toolbox guide: no concurrent processes
on a device), and npu-exporter polling skews them (toolboxug_0011).
"""

from __future__ import annotations

from collections import Counter
from functools import cached_property

from ascend_ready.checks.parsers.ascend_dmi import (
    DmiBandwidth,
    DmiFlops,
    DmiP2p,
    parse_dmi_bandwidth,
    parse_dmi_flops,
    parse_dmi_p2p,
)
from ascend_ready.checks.perf_sku import Expected, Metric, Sku, expected_for, sku_for_chip
from ascend_ready.checks.resources.base import ProbeDef, ProbeFailed, Resource, probe
from ascend_ready.checks.resources.npu import NpuSmi

__all__ = ["DMI_BW", "DMI_FLOPS", "DMI_P2P", "AscendDmi", "NodeSku"]

#: where the toolbox installs its environment script (MindCluster ToolBox user guide, "installation")
TOOLBOX_ENV = "/usr/local/Ascend/toolbox/set_env.sh"
_ENV = f'[ -f {TOOLBOX_ENV} ] && . {TOOLBOX_ENV} >/dev/null 2>&1; '
#: 512 MiB x 50 copies: the FlagRT/FlagPerf A3 protocol (`-s 536870912 --et 50`), about 1 s on Gen4 x16
_SIZE, _TIMES = "536870912", "50"


def _dmi(id_: str, args: str, *, foreach: str | None = "davinci", timeout_s: float = 120,
         what: str) -> ProbeDef:
    return probe(id_, shell=_ENV + "exec ascend-dmi " + args, foreach=foreach, timeout_s=timeout_s,
                 tool="ascend-dmi", description=what)


DMI_FLOPS = _dmi("ascend-dmi-flops", '-f -t fp16 -d "$1" -q',
                 what="FP16 cube TFLOPS per device (ascend-dmi -f), judged against the SKU's peak")
DMI_BW = {
    "h2d": _dmi("ascend-dmi-h2d", f'--bw -t h2d -d "$1" -s {_SIZE} --et {_TIMES} -q',
                what="host-to-device copy GB/s per device (PCIe; the HCCS plane on A3)"),
    "d2h": _dmi("ascend-dmi-d2h", f'--bw -t d2h -d "$1" -s {_SIZE} --et {_TIMES} -q',
                what="device-to-host copy GB/s per device"),
    "hbm": _dmi("ascend-dmi-d2d", '--bw -t d2d -d "$1" -q',
                what="device memory (HBM) GB/s per device (ascend-dmi d2d)"),
}
DMI_P2P = _dmi("ascend-dmi-p2p", "--bw -t p2p -q", foreach=None, timeout_s=600,
               what="device-to-device GB/s between every two devices of the node (HCCS)")

_MISSING_HINT = ("install the MindCluster ToolBox on the node (site.yml with toolbox_install: true, or "
                 "Ascend-mindx-toolbox_*.run --install), then run ascend-check --tier full again; without it "
                 "the bandwidth and FLOPS checks measure with torch")


class NodeSku(Resource):
    """The SKU of the node's chips as `npu-smi info` names them (never assumed from the profile)."""

    requires = (NpuSmi,)

    @cached_property
    def names(self) -> list[str]:
        return [c.name for c in self.host.npu_smi.chips]

    @cached_property
    def sku(self) -> tuple[str, Sku] | None:
        """(SKU id, figures) of the node's most common chip name, or None for a chip sku_perf.yml lacks."""
        if not self.names:
            raise ProbeFailed("npu-smi info lists no chip: no SKU to judge against",
                              hint="fix npu.count first")
        name = Counter(self.names).most_common(1)[0][0]
        return sku_for_chip(name)

    @property
    def chip_name(self) -> str:
        return Counter(self.names).most_common(1)[0][0]

    def expected(self, metric: Metric, *, dtype: str = "fp16",
                 link_width: int | None = None) -> Expected | None:
        """The SKU's expected figure and floor of `metric` (None for a chip or metric sku_perf.yml lacks):
        the one lookup the perf checks and the burn-in's load judge by."""
        found = self.sku
        return None if found is None else expected_for(*found, metric, dtype=dtype, link_width=link_width)


class AscendDmi(Resource):
    """`ascend-dmi -f` and `--bw` per device, `--bw -t p2p` once: parsed, keyed by device logic id."""

    probes = (DMI_FLOPS, *DMI_BW.values(), DMI_P2P)

    def _per_device(self, base: str, parse) -> dict[int, object]:
        out = {}
        for key, res in self.host.instances(base).items():
            if res.rc == 127 or "ascend-dmi: not found" in res.stderr:
                raise ProbeFailed(f"`{res.command}`: ascend-dmi is not installed on {self.host.name}",
                                  hint=_MISSING_HINT)
            out[int(key)] = parse(self.host.stdout(f"{base}.{key}"))
        if not out:
            raise ProbeFailed(f"no device to run {base} on (/dev/davinci* lists none)",
                              hint="fix npu.count first")
        return out

    @cached_property
    def flops(self) -> dict[int, DmiFlops]:
        return self._per_device("ascend-dmi-flops", parse_dmi_flops)

    def bandwidth(self, metric: str) -> dict[int, DmiBandwidth]:
        return self._per_device(DMI_BW[metric].id, parse_dmi_bandwidth)

    @cached_property
    def p2p(self) -> DmiP2p:
        res = self.host.result(DMI_P2P.id)
        if res.rc == 127:
            raise ProbeFailed(f"`{res.command}`: ascend-dmi is not installed on {self.host.name}",
                              hint=_MISSING_HINT)
        return parse_dmi_p2p(self.host.stdout(DMI_P2P.id))

    @cached_property
    def installed(self) -> bool:
        """Whether the node runs ascend-dmi at all (its P2P probe did not exit 127, `not found`)."""
        res = self.host.result(DMI_P2P.id)
        return not (res.rc == 127 or "ascend-dmi: not found" in res.stderr)

    def command(self, base: str, key: str | None = None) -> str:
        res = self.host.result(f"{base}.{key}" if key is not None else base)
        return res.command
