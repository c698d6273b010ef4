"""`python -m streams.wire [folder]`: write every topic's JSON Schema (default: schemas/)."""

import sys
from pathlib import Path

from streams.wire.schemas import SCHEMA_DIR, write_schemas

if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_DIR
    for written in write_schemas(target):
        print(written)
