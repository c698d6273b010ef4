#!/bin/bash
# The official image's tool of this name: asks a broker for its API versions (the healthcheck).
exec java -Xmx64m -XX:TieredStopAtLevel=1 -Xshare:auto -cp '/opt/kafka/libs/*' \
    -Dlog4j2.level=error org.apache.kafka.tools.BrokerApiVersionsCommand "$@"
