"""The options of `tidemark streams create|update`, as typer annotations: each flag's metavar and
help in one place (its default in brackets is `create`'s; `update` keeps what is not given)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

Stream = Annotated[str, typer.Argument(metavar="STREAM", help="the stream id", show_default=False)]


def _duration(help_text: str) -> Any:
    return typer.Option(metavar="DURATION", help=help_text)


Window = Annotated[str | None, _duration("window length, e.g. 1m [1m]")]
Step = Annotated[str | None, _duration("data resolution, bypasses truncate to it [15s]")]
Delay = Annotated[str | None, _duration("how long after its end a window is due [0s]")]
Timeout = Annotated[str | None, _duration("deadline for a task's result [1m]")]
BypassAfter = Annotated[str | None, _duration("give up on a window failing this long [5m]")]
Retry = Annotated[
    str | None,
    typer.Option(
        metavar="POLICY",
        help="immediate | fixed:60s | exponential:INITIAL,MULTIPLIER,MAX[,JITTER] [fixed:60s]",
    ),
]
MaxAttempts = Annotated[
    int | None, typer.Option(min=0, help="bypass after this many attempts, 0 = no limit [0]")
]
NonRetryable = Annotated[
    list[str] | None,
    typer.Option(metavar="KIND", help="an error kind bypassed at once (repeatable)"),
]
MaxInFlight = Annotated[int | None, typer.Option(min=1, help="windows dispatched at once [1]")]
End = Annotated[
    str | None,
    typer.Option(metavar="TIME", help="a bounded stream: no window past it, then finished"),
]
GcGrace = Annotated[
    str | None, _duration("keep a finished or deleted stream's state this long [48h]")
]
BypassRetention = Annotated[
    str | None, _duration("keep a bypassed window listed (replayable) this long [30d]")
]
Param = Annotated[
    list[str] | None,
    typer.Option("--param", metavar="KEY=VALUE", help="a task param, JSON or text (repeatable)"),
]
ParamsJson = Annotated[
    str | None, typer.Option(metavar="JSON", help="all task params as one JSON object")
]
Source = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="what the stream reads from, e.g. its query endpoint: the outage guard holds the "
        'bypasses of a source\'s streams while most of them fail together ("" clears it)',
    ),
]

PipelineOpt = Annotated[
    str | None,
    typer.Option(
        "--pipeline",
        metavar="NAME",
        help="which workers run the stream's tasks: those started with --route NAME, reading "
        "{prefix}.tasks.NAME (made here if missing) [default: the workers without --route]",
    ),
]
