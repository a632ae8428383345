"""`[engine] max_jobs` in semo.toml: the jobs an engine runs at once (its dispatcher's run_job
budget); a whole number from 1 to 256, anything else a clear error naming the line and the key.
(Here because tests/test_config.py is another helper's; the example's line is checked there.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from semo.engine.config import ConfigError, load_config


def write(folder: Path, engine: str) -> Path:
    path = folder / "semo.toml"
    path.write_text(f'[office]\nname = "o"\n\n[engine]\n{engine}\n')
    return path


def test_max_jobs_defaults_to_8_and_is_read(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "")).engine.max_jobs == 8
    assert load_config(write(tmp_path, "max_jobs = 2")).engine.max_jobs == 2
    assert load_config(write(tmp_path, "max_jobs = 256")).engine.max_jobs == 256


@pytest.mark.parametrize("value", ["0", "-1", "257", "2.5", "true", '"3"', "[1]"])
def test_a_bad_max_jobs_is_a_clear_error(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, f"max_jobs = {value}"))
    message = str(caught.value)
    assert "semo.toml:5: [engine] max_jobs: must be a whole number from 1 to 256" in message
    assert "the jobs this engine runs at once" in message
