"""Logging for rule scripts: everything to the job's log file, user errors without traceback."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

from skilleval.errors import SkillevalError


@contextlib.contextmanager
def logged(path: str, level: int = logging.INFO) -> Iterator[logging.Logger]:
    """Send logging and stderr to ``path``; a SkillevalError ends the job with one clear line."""
    with open(path, "a", buffering=1) as handle, contextlib.redirect_stderr(handle):
        handler = logging.StreamHandler(handle)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(level)
        try:
            yield root
        except SkillevalError as error:
            root.error("%s", error)
            print(f"skilleval: {error} (log: {path})", file=sys.__stderr__)
            raise SystemExit(1) from None
        except BaseException:
            root.exception("job failed")
            raise
        finally:
            root.removeHandler(handler)
