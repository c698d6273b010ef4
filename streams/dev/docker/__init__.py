"""Docker for the tests on a machine with no image registry: a Docker engine started where none
runs (engine.py), and the stack's images built locally (images.py). `python -m streams.dev.docker`
does both from a shell."""

from streams.dev.docker.engine import DockerEngine, DockerUnavailable
from streams.dev.docker.images import LocalImages, build_images

__all__ = ["DockerEngine", "DockerUnavailable", "LocalImages", "build_images"]
