# s3events image: Python 3.11, Java 17 for Spark, and the package with its dependencies.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/s3events
COPY pyproject.toml README.md ./
COPY s3events ./s3events
COPY bin ./bin
RUN pip install --no-cache-dir '.[local]'
# No SPARK_LOCAL_IP here: a driver on a cluster must bind an address its executors reach. Set it only for
# local runs that need it (e.g. SPARK_LOCAL_IP=127.0.0.1 on a host whose name does not resolve).
ENV PYSPARK_PYTHON=python3
ENTRYPOINT ["s3events"]
