# The tidemark image: the `tidemark` CLI (coordinator, worker, topics, streams, ...) with every
# dependency at the version constraints.txt pins. Used by docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml constraints.txt ./
COPY streams ./streams
RUN pip install -c constraints.txt . \
    && useradd --create-home --uid 10001 tidemark \
    && mkdir -p /data \
    && chown tidemark /data

# The coordinator's RocksDB table lives here (a volume in docker-compose.yml).
ENV TIDEMARK_DATA_DIR=/data/coordinator
USER tidemark
CMD ["tidemark", "--help"]
