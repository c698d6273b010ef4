"""The development broker on 127.0.0.1:9092 (`make kafka`, `make kafka-stop`).

python -m streams.dev.broker fetch [VERSION ...]  # download the jars once (Maven, .kafka/jars-V)
python -m streams.dev.broker start    # start the dev broker in the background, wait until ready
python -m streams.dev.broker stop     # stop it; no process is left behind
python -m streams.dev.broker status

The version is TIDEMARK_KAFKA_VERSION, else the default (streams/dev/broker/versions.py); `fetch`
fetches the versions it is given, else that one.
"""

from __future__ import annotations

import sys

from streams.dev.broker.jars import KAFKA_VERSION, fetch_jars, jars_dir_for
from streams.dev.broker.node import dev_broker
from streams.errors import BrokerUnavailable
from streams.kafka.admin import wait_ready
from streams.kafka.settings import KafkaSettings


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "status"
    broker = dev_broker()
    try:
        if command == "fetch":
            for version in args[1:] or [KAFKA_VERSION]:
                print(f"Kafka {version} jars in {fetch_jars(jars_dir_for(version), version)}")
        elif command == "start":
            if broker.running_pid() is not None:
                wait_ready(KafkaSettings(broker.bootstrap_servers), timeout_s=30)
                print(f"Kafka is already running on {broker.bootstrap_servers}")
            else:
                broker.start()
                print(f"Kafka {KAFKA_VERSION} is up on {broker.bootstrap_servers}")
                print(f"  data and logs: {broker.home}; stop it with: make kafka-stop")
        elif command == "stop":
            print("Kafka stopped" if broker.stop() else "Kafka was not running")
        elif command == "status":
            pid = broker.running_pid()
            print(f"running (pid {pid}) on {broker.bootstrap_servers}" if pid else "not running")
            return 0 if pid else 1
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except BrokerUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
