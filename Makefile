# Two set-up commands, each works on a fresh machine (they create .venv themselves):
#   make demo   - the whole pipeline end to end on an embedded local S3/SQS endpoint
#   make test   - the whole test suite on parallel workers (CI runs this)
# Smaller tiers for the edit-test loop (docs/development.md):
#   make test-fast  - pure logic: no JVM, no moto_server (under 30 s)
#   make test-quick - lint, unit and in-process integration (moto_server, this process's Spark): no child
#                     processes, fault injection, clusters or delta-spark (under 5 minutes)
#   make test-long  - the tests with a long-run size, at that size (hours)
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
# Parallel workers of `make test` / `make test-quick`, each with its own moto_server and Spark session
# (~0.5-1 GB each). On 2 cores most of a test's time is waiting (child processes, JVM start-up, polls),
# so more workers than cores pays. One test at a time per worker (--maxschedchunk 1): with xdist's
# default chunks one worker was handed the first quarter of the longest-first order, every
# multi-minute process test, and ran them one after another while the others finished early.
WORKERS ?= 4
XDIST := -n $(WORKERS) --dist load --maxschedchunk 1

.PHONY: demo test test-fast test-quick test-long lint venv clean

# --no-compile: pip compiles every module on one core (about 20 s); the test targets compile them
# beside the class archive instead (PREPARE), and `make demo` compiles what it imports as it goes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet --no-compile -e '.[test]'
	touch $(STAMP)

# Before a test run: the class archive every test JVM maps (tests/jvm.py, written once per virtualenv)
# and the virtualenv's bytecode, at once: the archive's JVM keeps about one core busy, compileall the
# other (it skips what is compiled already).
PREPARE := $(VENV)/bin/python -m compileall -qq -j 0 $(VENV)/lib >/dev/null & $(VENV)/bin/python -m tests.jvm; wait

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/s3events demo

# --durations: every run (and CI) prints the slowest tests, for docs/development.md's table.
test: $(STAMP)
	$(PREPARE)
	$(VENV)/bin/python -m pytest -q $(XDIST) --durations=25 $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m "not integration" tests/unit $(PYTEST_ARGS)

test-quick: lint
	$(PREPARE)
	$(VENV)/bin/python -m pytest -q $(XDIST) -m "not (process or chaos or cluster or interop)" $(PYTEST_ARGS)

test-long: $(STAMP)
	$(PREPARE)
	$(VENV)/bin/python -m pytest -q -m long $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check s3events tests benchmarks
	$(VENV)/bin/mypy s3events

clean:
	rm -rf $(VENV) demo-data .pytest_cache .mypy_cache .ruff_cache
