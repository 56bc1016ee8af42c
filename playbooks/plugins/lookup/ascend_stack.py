"""Lookup `ascend_stack`: resolve the Ascend stack a node gets, from provision/matrix.yml.

It calls the same resolver as `ascend-matrix resolve` (ascend_ready.provision.resolver.resolve), so the
playbooks, the CLI and ascend-check read one matrix file.
"""

from __future__ import annotations

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

DOCUMENTATION = r"""
name: ascend_stack
short_description: Resolve a full Ascend stack (driver, firmware, CANN, torch, torch_npu) from pins
description:
  - Picks the stack from the ascend-ready compatibility matrix for any subset of pins, or by stack id.
  - Fails with the matrix's reason (which pin ruled out the last candidates, and the nearest fit).
options:
  stack:
    description: A matrix stack id such as cann-8.2.RC1-torch-2.5.1 (fixes cann, torch and torch_npu).
    type: str
  cann: {description: CANN version pin., type: str}
  torch: {description: PyTorch version pin., type: str}
  torch_npu: {description: torch_npu version pin., type: str}
  driver: {description: NPU driver version pin., type: str}
  product: {description: "NPU product id (910b, 910_93, 310p).", type: str}
  os: {description: Matrix OS id (centos7.6, ubuntu22.04...)., type: str}
  arch: {description: aarch64 or x86_64., type: str}
  python: {description: Python MAJOR.MINOR for the wheels., type: str}
  matrix: {description: Matrix file instead of the packaged provision/matrix.yml., type: str}
  nodes:
    description:
      - Resolve many nodes in one call (the matrix is read once), e.g. every host of a play.
      - A dict of node name to that node's pins (the options above, without matrix); a node without an
        os gets the matrix id of its distribution and distribution_version (Ansible's facts).
      - Returns one dict of node name to {os, stack} or, where the node's pins fit no stack, {os, error}.
    type: dict
"""

RETURN = r"""
_raw:
  description: One ResolvedStack (see ascend_ready.provision.resolver.ResolvedStack) as a dict.
  type: list
  elements: dict
"""


_PINS = ("cann", "torch", "torch_npu", "driver", "product", "os", "arch", "python")


def _matrix_module():
    try:
        from ascend_ready.provision import matrix as mx
    except ImportError as exc:
        raise AnsibleLookupError(f"ascend_stack needs the ascend_ready package in the controller's Python "
                                 f"({exc}); run ansible-playbook from its environment") from None
    return mx


def os_id(distribution: str, version: str, matrix_file: str | None = None) -> str:
    """The matrix OS id for Ansible's distribution facts, '' when the matrix does not track that OS.

    Kylin's facts name no service pack ("V10"); when every tracked service pack of that release has
    the same glibc, Python and family, the first is as good as any for resolving, so it is used.
    """
    mx = _matrix_module()
    m = mx.load_matrix(matrix_file or None)
    found = mx.os_id_for(str(distribution), str(version), m)
    if found:
        return found
    if "kylin" in str(distribution).lower():
        prefix = "kylin" + str(version).strip().lower()
        same = [o for o in m.os if o.id.startswith(prefix)]
        if same and len({(o.glibc, o.python3, o.family) for o in same}) == 1:
            return same[0].id
    return ""


def resolve_nodes(nodes: dict[str, dict], matrix_file: str | None = None) -> dict[str, dict]:
    """resolve_stack for each node: {name: {"os": id, "stack": resolved}} or {name: {"os": id, "error": why}}.

    A node's failure is data, not an exception, so each host of a play fails on its own.
    """
    out = {}
    for name, node in nodes.items():
        pins = {k: node.get(k) for k in _PINS}
        pins["os"] = pins["os"] or os_id(node.get("distribution", ""), node.get("distribution_version", ""),
                                         matrix_file)
        try:
            stack = resolve_stack(node.get("stack"), matrix_file, **pins)
        except AnsibleLookupError as exc:
            out[name] = {"os": pins["os"], "error": exc.message}
        else:
            out[name] = {"os": pins["os"], "stack": stack}
    return out


def resolve_stack(stack: str | None = None, matrix_file: str | None = None, **pins: str | None) -> dict:
    """The resolved stack as a plain dict; raises AnsibleLookupError with the matrix's reason and hint."""
    mx = _matrix_module()
    from ascend_ready.errors import AscendReadyError
    from ascend_ready.provision.resolver import resolve

    given = {k: str(v).strip() for k, v in pins.items() if v is not None and str(v).strip()}
    try:
        m = mx.load_matrix(matrix_file or None)
        if stack:
            row = next((s for s in m.stacks if s.id.lower() == stack.strip().lower()), None)
            if row is None:
                raise mx.MatrixError(f"stack: unknown stack id {stack!r}",
                                     hint="ids are listed by `ascend-matrix show`, e.g. " + m.stacks[-1].id)
            for key, value in (("cann", row.cann), ("torch", row.torch), ("torch_npu", row.torch_npu)):
                if key in given and not mx.same_version(given[key], value):
                    raise mx.MatrixError(f"{key}: pinned {given[key]} but stack {row.id} has {value}",
                                         hint="pin either the stack id or the component, not both")
                given[key] = value
        resolved = resolve(m, **given)
    except AscendReadyError as exc:
        hint = f" (hint: {exc.hint})" if exc.hint else ""
        raise AnsibleLookupError(f"invalid Ascend stack: {exc.message}{hint}") from None
    return resolved.model_dump(mode="json")


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if self.get_option("nodes") is not None:
            return [resolve_nodes(self.get_option("nodes"), self.get_option("matrix"))]
        pins = {k: self.get_option(k) for k in _PINS}
        return [resolve_stack(self.get_option("stack"), self.get_option("matrix"), **pins)]
