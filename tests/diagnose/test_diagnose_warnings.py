"""A warning is what a program went on from: a logger's WARNING line or a Python warning that quotes an
exception (a missing optional cache file, a directory it may not write and falls back from) names no cause
by a rule of structure alone (an errno and its path, a missing module) nor by the bare Python exception,
while the same exception as the run's error still does.

The lines are printed by the real producers, run here: CPython's OSError text, `logging`'s default format
and `warnings.showwarning`'s, as a framework prints "could not read X: {type}: {exc}"."""

from __future__ import annotations

import io
import logging
import warnings
from pathlib import Path

from ascend_ready.checks.diagnose import diagnose_paths


def _oserror(errno: int, path: str) -> str:
    import os

    exc = (FileNotFoundError if errno == 2 else PermissionError)(errno, os.strerror(errno), path)
    return f"{type(exc).__name__}: {exc}"


def _logged(level: int, message: str) -> str:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logger = logging.getLogger("ascend-ready-test-warnings")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.log(level, message)
    finally:
        logger.removeHandler(handler)
    return out.getvalue()


def _warned(message: str) -> str:
    return warnings.formatwarning(message, UserWarning, "/opt/venv/lib/python3.11/site-packages/x/cache.py",
                                  88)


def _findings(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    log = tmp_path / "run.log"
    log.write_text(text + "step 10 loss 1.23\ntraining finished\n")
    return [(f.id, f.code) for f in diagnose_paths([log]).findings]


def test_an_oserror_a_warning_quotes_names_no_cause(tmp_path):
    text = (_logged(logging.WARNING, "could not read the token: " + _oserror(2, "/root/.cache/hf/token"))
            + _warned(_oserror(13, "/tmp/torchinductor_root") + "; compiling without a cache"))
    assert text.splitlines()[0].startswith("WARNING:ascend-ready-test-warnings:could not read the token: "
                                           "FileNotFoundError: [Errno 2] No such file or directory: ")
    assert ": UserWarning: PermissionError: [Errno 13] Permission denied: '/tmp/torchinductor_root'" in text
    assert _findings(tmp_path, text) == []


def test_the_same_oserror_as_the_runs_error_is_named(tmp_path):
    text = (_logged(logging.ERROR, "could not read the token: " + _oserror(2, "/root/.cache/hf/token"))
            + _oserror(13, "/tmp/torchinductor_root") + "\n")
    assert [entry for entry, _code in _findings(tmp_path, text)] == ["file-not-found", "permission-denied"]
