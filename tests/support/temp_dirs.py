"""Temporary folders and captured logs for tests."""

import contextlib
import io
import logging
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from semo.engine.logs import configure_logging


@contextlib.contextmanager
def short_temp_dir(prefix: str) -> Iterator[Path]:
    """A fresh folder under the system temp folder, removed after: short enough for Unix
    socket paths (pytest's tmp_path can pass the AF_UNIX limit)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def captured_logs(fmt: str, secrets: Iterable[str] = ()) -> Iterator[io.StringIO]:
    """semo's logging configured in `fmt` into a string, its handler taken off after."""
    stream = io.StringIO()
    configure_logging(fmt, secrets=secrets, stream=stream)  # type: ignore[arg-type]
    try:
        yield stream
    finally:
        root = logging.getLogger()
        for handler in list(root.handlers):
            if getattr(handler, "stream", None) is stream:
                root.removeHandler(handler)
