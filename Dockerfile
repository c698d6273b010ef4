# The tidemark image: the `tidemark` CLI (coordinator, worker, topics, streams, ...) with every
# dependency at the version constraints.txt pins. Used by docker-compose.yml.
#
# BASE is any Debian-like image: python:3.11-slim by default; the tests build on a local Debian
# made with debootstrap where no registry is reachable (streams/dev/docker/images.py), and install
# Python 3.11 from Debian when the base has none. Either way Tidemark lives in /opt/tidemark.
ARG BASE=python:3.11-slim
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/tidemark/bin:$PATH

RUN if ! python3 -c "import venv, ensurepip" 2>/dev/null; then \
        apt-get update -q \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/tidemark

# The dependencies first, in a layer of their own: a change to Tidemark's code alone rebuilds
# only the last two layers.
WORKDIR /app
COPY pyproject.toml constraints.txt ./
RUN python3 -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; open('/tmp/requirements.txt', 'w').write('\\n'.join(deps))" \
    && pip install -c constraints.txt -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY README.md LICENSE ./
COPY streams ./streams
RUN pip install --no-deps . \
    && useradd --create-home --uid 10001 tidemark \
    && mkdir -p /data \
    && chown tidemark /data

# The coordinator's RocksDB table lives here (a volume in docker-compose.yml).
ENV TIDEMARK_DATA_DIR=/data/coordinator
USER tidemark
CMD ["tidemark", "--help"]
