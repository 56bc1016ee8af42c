"""Kind hccn-collection: several echoed `hccn_tool -i N <option> -g` commands at once (`for i in 0..7`
collection scripts), each output dispatched by its option; errors keep whole-collection line numbers."""

from __future__ import annotations

from pydantic import SerializeAsAny

from ascend_ready.checks.parsers.base import ParsedModel, fail, numbered_lines, parser
from ascend_ready.checks.parsers.hccn._output import ECHO_RE
from ascend_ready.errors import ParseError


class CommandOutput(ParsedModel):
    """One `hccn_tool -i N <args>` echo of a collection and the text under it (echo line included)."""

    device_id: int
    args: str
    #: 1-based line number of the echo line in the whole collection
    first_line: int
    text: str


def split_commands(text: str) -> list[CommandOutput]:
    """Cut a collection of `hccn_tool -i N <args>` echoes + outputs (as `for i in ...` scripts write
    them) into per-command texts. Lines before the first echo must be blank."""
    kind = "hccn-collection"
    out: list[tuple[int, str, int, list[str]]] = []
    for line in numbered_lines(text):
        match = ECHO_RE.match(line.strip())
        if match:
            out.append((int(match["dev"]), match["args"].strip(), line.no, [str(line)]))
        elif out:
            out[-1][3].append(str(line))
        elif line.strip():
            raise fail(kind, "output before the first hccn_tool command line", line)
    if not out:
        raise fail(kind, "no `hccn_tool -i N ...` command lines", hint="collect with the commands echoed")
    return [CommandOutput(device_id=dev, args=args, first_line=no, text="\n".join(lines) + "\n")
            for dev, args, no, lines in out]


def _shifted(error: ParseError, block: CommandOutput) -> ParseError:
    """The error of a block's parser, with its line number counted in the whole collection."""
    line_no = None if error.line_no is None else error.line_no + block.first_line - 1
    return ParseError(error.kind, error.reason, line_no=line_no, line=error.line, hint=error.hint)


def parse_per_device(kind: str, text: str) -> dict[int, ParsedModel]:
    """Parse each device's output of a one-command collection (`hccn_tool -i $i -ip -g` for every i)."""
    from ascend_ready.checks.parsers.base import get_parser

    parse = get_parser(kind)
    results: dict[int, ParsedModel] = {}
    for block in split_commands(text):
        if block.device_id in results:
            raise fail(kind, f"device {block.device_id} appears twice", line_no=block.first_line)
        try:
            results[block.device_id] = parse(block.text)
        except ParseError as error:
            raise _shifted(error, block) from None
    return results


#: the option of an echoed command line -> the kind that reads its output
_OPTION_KINDS = {"-ip": "hccn-ip", "-link": "hccn-link", "-net_health": "hccn-net-health",
                 "-gateway": "hccn-gateway", "-netdetect": "hccn-netdetect",
                 "-link_stat": "hccn-link-stat", "-stat": "hccn-stat", "-optical": "hccn-optical",
                 "-fec": "hccn-fec", "-tls": "hccn-tls", "-lldp": "hccn-lldp", "-ping": "hccn-ping",
                 "-status": "hccn-status", "-hw_stats": "hccn-hw-stats", "-route": "hccn-route"}


class CollectionEntry(ParsedModel):
    device_id: int
    #: the arguments as echoed: `-ip -g`
    command: str
    kind: str
    result: SerializeAsAny[ParsedModel]


class HccnCollection(ParsedModel):
    """Several `hccn_tool -i N <option> -g` outputs, each under its echoed command line."""

    entries: list[CollectionEntry]

    def get(self, kind: str, device_id: int) -> ParsedModel | None:
        return next((e.result for e in self.entries if e.kind == kind and e.device_id == device_id), None)


@parser("hccn-collection")
def parse_hccn_collection(text: str) -> HccnCollection:
    """Parse a collection of echoed hccn_tool commands, each output with the kind its option names."""
    from ascend_ready.checks.parsers.base import get_parser

    entries = []
    for block in split_commands(text):
        option = next((arg for arg in block.args.split() if arg in _OPTION_KINDS), None)
        if option is None:
            raise fail("hccn-collection", f"no parser for `hccn_tool {block.args}`",
                       line_no=block.first_line, line=block.text.splitlines()[0])
        kind = _OPTION_KINDS[option]
        try:
            result = get_parser(kind)(block.text)
        except ParseError as error:
            raise _shifted(error, block) from None
        entries.append(CollectionEntry(device_id=block.device_id, command=block.args, kind=kind,
                                       result=result))
    return HccnCollection(entries=entries)
