"""Outside the two delivery modules, no code asks which engine it runs under (issue 27, item 1).

The Processor is handed its engine's unit of work (streams.coordinator.delivery.Delivery); the
Faust engine's outbox (streams/coordinator/faust/outbox.py) and the Kafka transaction
(streams/coordinator/confluent/) are the only places that know which one it is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import streams

ROOT = Path(streams.__file__).parent
DELIVERY = (ROOT / "coordinator" / "confluent", ROOT / "coordinator" / "faust")
# An identifier that says which engine runs: a flag, a parameter, an attribute, a keyword.
ASKS = {"transactional", "is_transactional", "exactly_once", "at_least_once"}
# A parameter or keyword that does (a record's `outbox` is data, which both engines keep).
ASKS_AS_PARAMETER = {"outbox", "with_outbox", "confirm_deliveries"}


def _names(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg is not None):
            found.add(node.arg)
            found.add(f"parameter {node.arg}")
    return found


def test_no_module_outside_the_delivery_modules_asks_which_engine_runs() -> None:
    asking = {}
    for path in sorted(ROOT.rglob("*.py")):
        if any(path == d or d in path.parents for d in DELIVERY):
            continue
        names = _names(ast.parse(path.read_text(), str(path))) & (
            ASKS | {f"parameter {name}" for name in ASKS_AS_PARAMETER}
        )
        if names:
            asking[str(path.relative_to(ROOT))] = sorted(names)
    assert asking == {}


def test_the_processor_takes_its_delivery_from_the_engine() -> None:
    from streams.coordinator.confluent.delivery import TransactionDelivery
    from streams.coordinator.faust.outbox import OutboxDelivery

    from .fakes import Driver

    assert isinstance(Driver(transactional=True).processor._delivery, TransactionDelivery)
    assert isinstance(Driver().processor._delivery, OutboxDelivery)
