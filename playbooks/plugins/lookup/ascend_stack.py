"""Lookup `ascend_stack`: resolve the Ascend stack a node gets, from provision/matrix.yml.

It calls the same resolver as `ascend-matrix resolve` (ascend_ready.provision.matrix.resolve), so the
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
"""

RETURN = r"""
_raw:
  description: One ResolvedStack (see ascend_ready.provision.matrix.ResolvedStack) as a dict.
  type: list
  elements: dict
"""


_PINS = ("cann", "torch", "torch_npu", "driver", "product", "os", "arch", "python")


def resolve_stack(stack: str | None = None, matrix_file: str | None = None, **pins: str | None) -> dict:
    """The resolved stack as a plain dict; raises AnsibleLookupError with the matrix's reason and hint."""
    try:
        from ascend_ready.provision import matrix as mx

        from ascend_ready.errors import AscendReadyError
    except ImportError as exc:
        raise AnsibleLookupError(f"ascend_stack needs the ascend_ready package in the controller's Python "
                                 f"({exc}); run ansible-playbook from its environment") from None
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
        resolved = mx.resolve(m, **given)
    except AscendReadyError as exc:
        hint = f" (hint: {exc.hint})" if exc.hint else ""
        raise AnsibleLookupError(f"invalid Ascend stack: {exc.message}{hint}") from None
    return resolved.model_dump(mode="json")


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        pins = {k: self.get_option(k) for k in _PINS}
        return [resolve_stack(self.get_option("stack"), self.get_option("matrix"), **pins)]
