"""The Docker tests' images: built here once per session (streams/dev/docker), with an engine
started for the session where none runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streams.dev.docker import DockerEngine, LocalImages, build_images


@pytest.fixture(scope="session")
def local_images() -> Iterator[LocalImages]:
    engine = DockerEngine.ensure()
    try:
        yield build_images()
    finally:
        engine.close()
