"""Which store a command uses: the URL given (`--store URL`), else $LNBENCH_STORE, else the config's
`[store] url`, else the SQLite file `lnbench.sqlite` in the results folder ($LNBENCH_RESULTS_DIR, default
results/). A plain path (no `://`) is an SQLite file."""
from __future__ import annotations

import os
from pathlib import Path

from lnbench import settings
from lnbench.output.files import default_results_dir

ENV = "LNBENCH_STORE"
DEFAULT_NAME = "lnbench.sqlite"


def as_url(text: str) -> str:
    """`text` as an SQLAlchemy URL: a path becomes sqlite:///<absolute path>."""
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().absolute()}"


def default_url() -> str:
    folder = default_results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return as_url(str(folder / DEFAULT_NAME))


def store_url(given: str | None, config_path: str | os.PathLike[str] | None = None) -> str:
    """The store URL (module docstring for the order)."""
    if given:
        return as_url(given)
    if os.environ.get(ENV):
        return as_url(os.environ[ENV])
    configured = settings.load_config(config_path).get("store", {}).get("url", "")
    return as_url(configured) if configured else default_url()
