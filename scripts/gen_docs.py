# ruff: noqa: E501  (ENV_DOC: one line per variable, the words as the page shows them)
"""Generate the docs' reference pages from the code: `python scripts/gen_docs.py`.

- docs/configuration.md: the coordinator's settings (CoordinatorSettings, read by `from_env`),
  the Kafka connection (KafkaSettings), the worker's (WorkerConfig), and every command's flags
  (the `tidemark` command tree; commands with a parser of their own give their `--help`), and
  every TIDEMARK_* / KAFKA_* environment variable that the code under streams/ names.
- docs/wire-schemas.md: one section per topic, from schemas/ (which `python -m streams.wire`
  generates from streams/wire/).

`--check` exits 1 when a page is not what the code makes (tests/docs/test_generated.py).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIG_PAGE = ROOT / "docs" / "configuration.md"
WIRE_PAGE = ROOT / "docs" / "wire-schemas.md"
ENV_NAME = re.compile(r"(TIDEMARK|KAFKA)_[A-Z0-9_]+")

# What each environment variable means. Names, defaults and bounds come from the code; this is
# the words. tests/docs/test_generated.py fails when the code reads a variable missing here.
ENV_DOC: dict[str, str] = {
    # the Kafka connection: every process and the CLI
    "KAFKA_BOOTSTRAP_SERVERS": "the brokers, for every process and the CLI",
    "KAFKA_SECURITY_PROTOCOL": "librdkafka `security.protocol`, e.g. `SASL_SSL` (plaintext when unset)",
    "KAFKA_SASL_MECHANISM": "librdkafka `sasl.mechanism`: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`",
    "KAFKA_SASL_USERNAME": "librdkafka `sasl.username`",
    "KAFKA_SASL_PASSWORD": "librdkafka `sasl.password`; never logged, nor shown in `/health`, `/metrics` or `--output json`",
    "KAFKA_SSL_CA_LOCATION": "librdkafka `ssl.ca.location`: the CA that signed the brokers' certificates",
    "KAFKA_SSL_CERTIFICATE_LOCATION": "librdkafka `ssl.certificate.location` (mutual TLS)",
    "KAFKA_SSL_KEY_LOCATION": "librdkafka `ssl.key.location` (mutual TLS)",
    "KAFKA_SSL_KEY_PASSWORD": "librdkafka `ssl.key.password` (mutual TLS)",
    "TIDEMARK_GROUP_PROTOCOL": "group protocol of the `confluent` coordinators and the workers: `classic`, or `consumer` (KIP-848, Kafka 4; [Kafka 4](kafka4.md))",
    "TIDEMARK_TOPIC_PREFIX": "topic prefix: every topic is `{prefix}.{name}` (coordinator, workers, CLI, status page)",
    # the coordinator
    "TIDEMARK_ENGINE": "engine: `confluent` (exactly once) or `faust` (at least once)",
    "TIDEMARK_INSTANCE_ID": "this process's stable identity (its `transactional.id`); default: the hostname and a hash of the data folder",
    "TIDEMARK_COMMIT_INTERVAL_MS": "transaction commit interval under load (`confluent`; it also commits as soon as the input runs dry)",
    "TIDEMARK_DATA_DIR": "table folder (RocksDB)",
    "TIDEMARK_PARTITIONS": "partitions of its topics (`tidemark topics create` reads it too)",
    "TIDEMARK_REPLICATION": "replication of its topics; unset: the cluster's `default.replication.factor` on 3 brokers or more, else 1",
    "TIDEMARK_MIN_INSYNC_REPLICAS": "`min.insync.replicas` of its topics; unset: the brokers'",
    "TIDEMARK_FLUSH_MS": "commit coalescing interval, `faust` (0 = immediate; `confluent` coalesces per transaction)",
    "TIDEMARK_VIEW_INTERVAL_MS": "a stream's `streams` view at most this often, `confluent` (0 = at every transaction; `faust` publishes with each change)",
    "TIDEMARK_TICK_MS": "how often the coordinator's timers run (due windows, retries, deadlines, commit flushes)",
    "TIDEMARK_SESSION_TIMEOUT_MS": "group session timeout of the coordinators and the workers (`classic`; under `consumer` it is the brokers' `group.consumer.session.timeout.ms`)",
    "TIDEMARK_CATCH_UP_MAX_MS": "takeover grace: how long a new owner waits to read `results` as far as they stood at assignment before deadlines count; default: the session timeout",
    "TIDEMARK_REPLAY_CONCURRENCY": "replay concurrency per stream",
    "TIDEMARK_WEB_HOST": "the coordinator's web server (`/health`, `/metrics`): address",
    "TIDEMARK_WEB_PORT": "the coordinator's web server: port",
    "TIDEMARK_TOP_LAGGARDS": "`/metrics`: how many of the most lagging streams get a `stream_id` label",
    "TIDEMARK_BEHIND_THRESHOLD_S": "`/metrics`: the progress lag, in seconds, past which a stream counts as behind",
    "TIDEMARK_OUTAGE_RATIO": "[outage guard](concepts.md#the-outage-guard): the share of a source's streams failing that makes an outage (above 0, at most 1)",
    "TIDEMARK_OUTAGE_MIN_STREAMS": "outage guard: the fewest failing streams that make an outage",
    "TIDEMARK_OUTAGE_MAX_HOLD_MS": "outage guard: the longest a window's bypass is held (0 turns the guard off)",
    "TIDEMARK_HEALTH_PUBLISH_MS": "outage guard: how often a coordinator publishes its counts to `health`",
    "TIDEMARK_HEALTH_STALE_MS": "outage guard: when a partition's published counts stop counting (longer than the above)",
    "TIDEMARK_STATE_CLEANUP_DELAY_MS": "how long the store of a partition revoked from this process is kept (`confluent`; Kafka Streams' `state.cleanup.delay.ms`)",
    # the CLI
    "TIDEMARK_CONNECT_TIMEOUT_S": "the CLI: seconds to wait for the broker before giving up (`tidemark --connect-timeout`)",
    # development and tests only
    "TIDEMARK_KAFKA_VERSION": "development: the local broker's Kafka version (`make kafka`, the tests, `make run`): 4.3.2 by default, or 3.9.2",
    "TIDEMARK_KAFKA_JARS": "development: the folder of the local broker's Maven jars",
    "TIDEMARK_BROKER_LOG": "development, internal: set by the local broker's launcher for the shell that starts a node (its log file); not for you to set",
    "TIDEMARK_IMAGE": "docker-compose.yml: the Tidemark image (`tidemark:local`); `python -m streams.dev.docker images` prints the local one ([With Docker](running.md#with-docker))",
    "KAFKA_IMAGE": "docker-compose.yml: the Kafka image (`apache/kafka:4.3.2`); `python -m streams.dev.docker images` prints the local stand-in",
    "TIDEMARK_CRASH_AT": "tests only: `<point>:<n>` kills the `confluent` coordinator the n-th time it reaches a commit step (`streams/coordinator/confluent/crash_points.py`)",
}
GROUPS = {
    "Kafka connection (every process and the CLI)": [
        "KAFKA_BOOTSTRAP_SERVERS",
        "KAFKA_SECURITY_PROTOCOL",
        "KAFKA_SASL_MECHANISM",
        "KAFKA_SASL_USERNAME",
        "KAFKA_SASL_PASSWORD",
        "KAFKA_SSL_CA_LOCATION",
        "KAFKA_SSL_CERTIFICATE_LOCATION",
        "KAFKA_SSL_KEY_LOCATION",
        "KAFKA_SSL_KEY_PASSWORD",
        "TIDEMARK_GROUP_PROTOCOL",
        "TIDEMARK_TOPIC_PREFIX",
    ],
    "CLI": ["TIDEMARK_CONNECT_TIMEOUT_S"],
    "Development and tests": [
        "TIDEMARK_KAFKA_VERSION",
        "TIDEMARK_KAFKA_JARS",
        "TIDEMARK_BROKER_LOG",
        "TIDEMARK_CRASH_AT",
        "TIDEMARK_IMAGE",
        "KAFKA_IMAGE",
    ],
}


def env_names_in_code() -> dict[str, list[str]]:
    """Every TIDEMARK_* and KAFKA_* name that a string in streams/ holds whole: file by name."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "streams").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        exported = {  # a module's __all__ names Python objects, not variables
            id(n)
            for a in ast.walk(tree)
            if isinstance(a, ast.Assign)
            and any(getattr(t, "id", "") == "__all__" for t in a.targets)
            for n in ast.walk(a.value)
        }
        for node in ast.walk(tree):
            if id(node) in exported:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                name = node.value
                if ENV_NAME.fullmatch(name):
                    rel = str(path.relative_to(ROOT))
                    found.setdefault(name, [])
                    if rel not in found[name]:
                        found[name].append(rel)
    return found


def _from_env_reads() -> dict[str, tuple[str, int | None]]:
    """CoordinatorSettings.from_env: each field's variable, and its minimum where it has one."""
    source = (ROOT / "streams/coordinator/settings.py").read_text()
    tree = ast.parse(source)
    reads: dict[str, tuple[str, int | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "from_env":
            call = next(n for n in ast.walk(node) if isinstance(n, ast.Call) and n.keywords)
            for kw in call.keywords:
                names = [
                    n.value
                    for n in ast.walk(kw.value)
                    if isinstance(n, ast.Constant)
                    and isinstance(n.value, str)
                    and ENV_NAME.fullmatch(n.value)
                ]
                minimum = None
                top = kw.value
                if isinstance(top, ast.Call) and getattr(top.func, "id", "") in (
                    "_env_int",
                    "_env_optional_int",
                ):
                    last = top.args[-1]
                    if isinstance(last, ast.Constant) and isinstance(last.value, int):
                        minimum = last.value
                if names and kw.arg:
                    reads[kw.arg] = (names[0], minimum)
    return reads


def _field_comments(path: Path, cls: str) -> dict[str, str]:
    """The comment lines just above each field of a dataclass."""
    lines = path.read_text().splitlines()
    out: dict[str, str] = {}
    inside, pending = False, []
    for line in lines:
        if line.startswith(f"class {cls}"):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            break
        if not inside:
            continue
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("# "))
            continue
        m = re.match(r"\s{4}(\w+): ", line)
        if m and pending:
            out[m.group(1)] = " ".join(pending)
        pending = []
    return out


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        return "(see below)"
    else:
        return "required"
    if value is None:
        return "unset"
    if value == "":
        return '""'
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def coordinator_section() -> list[str]:
    from streams.coordinator.settings import CoordinatorSettings
    from streams.core import OutagePolicy

    reads = _from_env_reads()
    comments = _field_comments(ROOT / "streams/coordinator/settings.py", "CoordinatorSettings")
    out = [
        "## Coordinator",
        "",
        "`CoordinatorSettings` (`streams/coordinator/settings.py`), read from the environment by",
        "`CoordinatorSettings.from_env`; `tidemark coordinator`'s flags (below) override some.",
        "A value out of bounds stops the coordinator at start, naming the variable.",
        "",
        "| variable | setting | default | at least | meaning |",
        "|---|---|---|---|---|",
    ]
    for field in dataclasses.fields(CoordinatorSettings):
        if field.name in ("kafka", "outage"):
            continue
        if field.name == "topics":
            env, minimum, default = "TIDEMARK_TOPIC_PREFIX", None, "`tidemark`"
        else:
            env, minimum = reads[field.name]
            default = _default(field)
        words = ENV_DOC.get(env) or comments.get(field.name, "")
        least = "" if minimum is None else str(minimum)
        out.append(f"| `{env}` | `{field.name}` | {default} | {least} | {_cell(words)} |")
    policy = OutagePolicy()
    for env, attr in (
        ("TIDEMARK_OUTAGE_RATIO", "ratio"),
        ("TIDEMARK_OUTAGE_MIN_STREAMS", "min_streams"),
        ("TIDEMARK_OUTAGE_MAX_HOLD_MS", "max_hold_ms"),
    ):
        value = getattr(policy, attr)
        out.append(f"| `{env}` | `outage.{attr}` | `{value}` |  | {_cell(ENV_DOC[env])} |")
    out.append("")
    return out


def env_group(title: str, names: list[str]) -> list[str]:
    out = [f"## {title}", "", "| variable | meaning |", "|---|---|"]
    out += [f"| `{name}` | {_cell(ENV_DOC[name])} |" for name in names]
    out.append("")
    return out


def kafka_section() -> list[str]:
    from streams.kafka.settings import DEFAULT_BOOTSTRAP, GROUP_PROTOCOLS

    out = env_group(
        "Kafka connection (every process and the CLI)",
        GROUPS["Kafka connection (every process and the CLI)"],
    )
    out[2:2] = [
        "`KafkaSettings` (`streams/kafka/settings.py`): the same variables for the coordinator,",
        f"the workers, the CLI and the status page. Brokers default to `{DEFAULT_BOOTSTRAP}`; the",
        f"group protocol is one of {', '.join(f'`{p}`' for p in GROUP_PROTOCOLS)}",
        f"(default `{GROUP_PROTOCOLS[0]}`); the prefix defaults to `tidemark`.",
        "",
    ]
    return out


def worker_section() -> list[str]:
    from streams.worker.config import DEFAULT_CONCURRENCY, WorkerConfig

    doc = "\n\n".join(
        " ".join(line.strip() for line in part.splitlines())
        for part in (WorkerConfig.__doc__ or "").strip().split("\n\n")
    )
    comments = _field_comments(ROOT / "streams/worker/config.py", "WorkerConfig")
    out = [
        "## Worker",
        "",
        "`WorkerConfig` (`streams/worker/config.py`), made from `tidemark worker`'s flags (below);",
        "the worker reads `TIDEMARK_TOPIC_PREFIX`, `TIDEMARK_SESSION_TIMEOUT_MS` and the Kafka",
        "connection's variables from the environment.",
        "",
        doc,
        "",
        "Default concurrency per handler kind: "
        + ", ".join(f"`{k}` {v}" for k, v in DEFAULT_CONCURRENCY.items())
        + ".",
        "",
        "| setting | default | note |",
        "|---|---|---|",
    ]
    for field in dataclasses.fields(WorkerConfig):
        out.append(
            f"| `{field.name}` | {_default(field)} | {_cell(comments.get(field.name, ''))} |"
        )
    out.append("")
    return out


def _click_rows(command: Any) -> list[str]:
    rows = []
    for param in command.params:
        if param.param_type_name != "option" or getattr(param, "hidden", False):
            continue
        flags = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        env = param.envvar if isinstance(param.envvar, str) else ", ".join(param.envvar or [])
        default = (
            ""
            if param.default is None or (param.is_flag and not param.default)
            else (f"`{getattr(param.default, 'value', param.default)}`")
        )
        rows.append(
            f"| {flags} | {f'`{env}`' if env else ''} | {default} | {_cell(param.help or '')} |"
        )
    return rows


def _passthrough_help(command: str) -> str:
    """`tidemark <command> --help` of a command with a parser of its own."""
    module = {"worker": "streams.worker.cli", "dashboard": "streams.dashboard.cli"}[command]
    main = __import__(module, fromlist=["main"]).main
    buffer = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
            main(["--help"])
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return buffer.getvalue().rstrip()


def cli_section() -> list[str]:
    import typer.main

    from streams.cli import app

    root = typer.main.get_command(app)
    out = [
        "## Command line",
        "",
        "Every `tidemark` command and its flags (`tidemark COMMAND --help` says the same).",
        "Global options go before the command: `tidemark --output json streams list`.",
        "",
        "### `tidemark` (global options)",
        "",
        "| flag | env | default | meaning |",
        "|---|---|---|---|",
        *_click_rows(root),
        "",
    ]

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "commands"):
            for name in sorted(command.commands):
                walk(command.commands[name], [*path, name])
            return
        name = " ".join(path)
        out.extend([f"### `tidemark {name}`", ""])
        summary = (command.help or "").strip().split("\n\n")[0].replace("\n", " ")
        if summary:
            out.extend([summary, ""])
        if command.context_settings.get("ignore_unknown_options") and path[-1] in (
            "worker",
            "dashboard",
        ):
            out.extend(["```text", _passthrough_help(path[-1]), "```", ""])
            return
        rows = _click_rows(command)
        args = [p for p in command.params if p.param_type_name == "argument"]
        if args:
            out.extend(["Arguments: " + ", ".join(f"`{a.name.upper()}`" for a in args), ""])
        if rows:
            out.extend(["| flag | env | default | meaning |", "|---|---|---|---|", *rows, ""])

    walk(root, [])
    return out


def configuration_page() -> str:
    found = env_names_in_code()
    out = [
        "# Configuration",
        "",
        "<!-- Generated by `python scripts/gen_docs.py` from the settings objects and the command",
        "line; do not edit: tests/docs/test_generated.py fails when it is not what they make. -->",
        "",
        "Every process reads its settings from the environment; flags override some. This page is",
        "made from the code: the settings objects, the command tree, and every `TIDEMARK_*` and",
        "`KAFKA_*` variable named under `streams/`.",
        "",
        *coordinator_section(),
        *kafka_section(),
        *worker_section(),
        *env_group("CLI", GROUPS["CLI"]),
        *env_group("Development and tests", GROUPS["Development and tests"]),
        "## Every variable, and where the code reads it",
        "",
        "| variable | read in |",
        "|---|---|",
        *(
            f"| `{name}` | {', '.join(f'`{p}`' for p in files)} |"
            for name, files in sorted(found.items())
        ),
        "",
        *cli_section(),
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " \\| ".join(_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema and not schema.get("properties"):
        extra = schema["additionalProperties"]
        return f"object of {_type(extra) if isinstance(extra, dict) else 'any'}"
    return f"`{kind}`"


def _bounds(schema: dict[str, Any]) -> str:
    parts = []
    for key, word in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
        ("minLength", "length >="),
        ("maxLength", "length <="),
    ):
        if key in schema:
            parts.append(f"{word} {schema[key]}")
    if "pattern" in schema:
        parts.append(f"matches `{schema['pattern']}`")
    if "default" in schema:
        parts.append(f"default `{json.dumps(schema['default'])}`")
    return ", ".join(parts)


def _object_table(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    props = schema.get("properties", {})
    if not props:
        return []
    out = ["| field | type | required | bounds | description |", "|---|---|---|---|---|"]
    for name, prop in props.items():
        out.append(
            f"| `{name}` | {_type(prop)} | {'yes' if name in required else ''} | "
            f"{_cell(_bounds(prop))} | {_cell(prop.get('description', ''))} |"
        )
    return out


def wire_page() -> str:
    out = [
        "# Wire contract: the schemas",
        "",
        "<!-- Generated by `python scripts/gen_docs.py` from schemas/; do not edit. -->",
        "",
        "One section per topic (`{prefix}.{topic}`), from its JSON Schema in `schemas/`",
        "(generated from `streams/wire/` by `python -m streams.wire`). What each topic is for, who",
        "writes it and how it is keyed: [the wire contract](wire.md).",
        "",
    ]
    for path in sorted((ROOT / "schemas").glob("*.schema.json")):
        topic = path.name.removesuffix(".schema.json")
        schema = json.loads(path.read_text())
        out += [
            f"## `{topic}`",
            "",
            f"Schema: `schemas/{path.name}` ({schema.get('title', '')}).",
            "",
        ]
        if schema.get("description"):
            out += [schema["description"], ""]
        if "oneOf" in schema:
            disc = schema.get("discriminator", {}).get("propertyName")
            out += [
                "One of: "
                + ", ".join(_type(s) for s in schema["oneOf"])
                + (f", told apart by `{disc}`." if disc else "."),
                "",
            ]
        out += _object_table(schema)
        out.append("")
        for name, sub in schema.get("$defs", {}).items():
            out += [f"### {name}", ""]
            if sub.get("description"):
                out += [sub["description"], ""]
            table = _object_table(sub)
            out += table if table else [f"Type: {_type(sub)}"]
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def pages() -> dict[Path, str]:
    return {CONFIG_PAGE: configuration_page(), WIRE_PAGE: wire_page()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a page is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in pages().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text)
    if stale:
        print(f"out of date: {', '.join(stale)}; run: python scripts/gen_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
