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
ENV PYSPARK_PYTHON=python3 SPARK_LOCAL_IP=127.0.0.1
ENTRYPOINT ["s3events"]
