#!/bin/bash
# Starts one KRaft node from KAFKA_* variables, as apache/kafka does: KAFKA_FOO_BAR is foo.bar
# (a double underscore is an underscore, a triple one a dash). KAFKA_HEAP_OPTS and KAFKA_OPTS
# go to the JVM. The storage is formatted on first start, with CLUSTER_ID when set.
set -euo pipefail

props=/opt/kafka/config/server.properties
: > "$props"
while IFS='=' read -r name value; do
    case "$name" in
        KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS) continue ;;
        KAFKA_*) ;;
        *) continue ;;
    esac
    key=${name#KAFKA_}
    key=${key,,}
    key=${key//___/-}
    key=${key//__/@}
    key=${key//_/.}
    key=${key//@/_}
    printf '%s=%s\n' "$key" "$value" >> "$props"
done < <(env)

cat > /opt/kafka/config/log4j2.properties <<'LOG'
appender.console.type=Console
appender.console.name=console
appender.console.layout.type=PatternLayout
appender.console.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=info
rootLogger.appenderRef.console.ref=console
LOG

classpath='/opt/kafka/libs/*'
log_dirs=$(sed -n 's/^log\.dirs=//p' "$props")
if [[ ! -e "${log_dirs:-/tmp/kraft-combined-logs}/meta.properties" ]]; then
    cluster_id=${CLUSTER_ID:-$(java -cp "$classpath" kafka.tools.StorageTool random-uuid)}
    java -cp "$classpath" -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties \
        kafka.tools.StorageTool format -t "$cluster_id" -c "$props"
fi

# shellcheck disable=SC2086  # the options are words, as in kafka-run-class.sh
exec java ${KAFKA_HEAP_OPTS:--Xmx1g} ${KAFKA_OPTS:-} -cp "$classpath" \
    -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties \
    kafka.Kafka "$props"
