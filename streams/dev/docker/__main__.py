"""Docker where no registry is reachable.

python -m streams.dev.docker images   # start an engine if none runs, build the stack's images,
                                      # and print the variables that make compose use them

Then, e.g.: `env $(python -m streams.dev.docker images) docker-compose up -d`.
"""

from __future__ import annotations

import sys

from streams.dev.docker.engine import DockerEngine, DockerUnavailable
from streams.dev.docker.images import build_images


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["images"]:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        engine = DockerEngine.ensure()
        if engine.started_here:
            print("docker: started dockerd; it keeps running",
                  file=sys.stderr)  # fmt: skip
        images = build_images()
    except DockerUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, value in images.compose_env().items():
        print(f"{name}={value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
