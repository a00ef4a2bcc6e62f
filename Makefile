# Two set-up commands, each works on a fresh machine (they create .venv themselves):
#   make demo   - the whole pipeline end to end on an embedded local S3/SQS endpoint
#   make test   - the test suite (CI runs this)
#   make test-fast - unit tests and pure logic only: no JVM, no moto_server, under a minute
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/s3events demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m "not integration" tests/unit $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check s3events tests benchmarks
	$(VENV)/bin/mypy s3events

clean:
	rm -rf $(VENV) demo-data .pytest_cache .mypy_cache .ruff_cache
