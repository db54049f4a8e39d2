# Every target bootstraps .venv on first use: `make run` and `make test` work on a fresh machine.
# A distribution's Python 3.11 (built with PGO and LTO) runs a pure-Python loop in three quarters of a pyenv
# build's time (compiled without --enable-optimizations unless asked); the fits, Newton's stepping and the servers
# spend much of their time in Python. Prefer it where it exists and can make a venv (Debian ships ensurepip apart,
# in python3.11-venv); else the first python3.11 or python3 on the PATH that can.
PYTHON ?= $(shell for p in /usr/bin/python3.11 python3.11 python3; do \
	command -v $$p > /dev/null && $$p -c 'import ensurepip, venv' 2> /dev/null && { command -v $$p; break; }; done)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1
PORT   ?= 8000
# Two test workers on two cores: one BLAS/OpenMP/torch thread each, so they do not oversubscribe the cores and
# starve the SCHED_IDLE fit workers of the servers the service tests start (their fits run on wall budgets).
# OpenBLAS picks its kernels by CPU (Zen, SkylakeX, ...), and their rounding differs: a seeded fit then takes
# another path on another machine. One x86-64 kernel set everywhere keeps tests/test_golden.py machine-proof.
THREADS := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell

# Every process the targets start writes the bytecode of what it imports, once, even where PYTHONDONTWRITEBYTECODE
# is set (as on this project's machines): compiling every installed module at install took longer than compiling
# what the tests import.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-fast bench lint format typecheck structure install clean bench-ingest

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch==2.13.0 (the CPU build from the local wheel; a range would pull a multi-GB CUDA build) and the project,
	# with uv where it can be had, else pip.
	tools/install_deps.sh $(BIN)
	# The real consumer package, for conformance tests: its actuator modules need only torch/warp/numpy. And the
	# peer, for recovery on logs its own simulator makes: bam.simulate needs only numpy and colorama (mujoco[sysid]
	# brings it); 1.0.2 declares Python 3.12 and runs on 3.11 (bench/bam_env.sh).
	$(BIN)/pip install -q --no-deps --ignore-requires-python isaaclab==3.0.0 better-actuator-models==1.0.2
	# Warp builds a kernel module when it first runs: build the CPU fits' modules now, not in the first fit.
	$(BIN)/actuator-sysid warmup
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/actuator-sysid serve --host $(HOST) --port $(PORT)

# Everything: ruff (lint and format) first, the structure check, then every test (markers in tests/conftest.py), one file per
# worker on two workers: most tests are single-threaded Python, Warp CPU kernels or a server subprocess.
# mypy is clean on actuator_sysid/ and stays so: it runs here, beside pytest, as in `make lint`.
test: $(STAMP)
	$(BIN)/ruff check actuator_sysid tests bench tools
	$(BIN)/ruff format --check actuator_sysid tests bench tools
	$(BIN)/python tools/check_structure.py --baseline tools/structure_baseline.txt
	# mypy (about 20 CPU-s from a cold cache) runs beside pytest, whose server and browser tests leave the cores idle
	# part of the time; its report prints after the tests, and either failing fails the target.
	log=$$(mktemp); $(BIN)/mypy > $$log 2>&1 & typing=$$!; \
	$(THREADS) $(BIN)/python -m pytest -q -n 2 --dist loadfile; tests=$$?; \
	wait $$typing; typed=$$?; cat $$log; rm -f $$log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The inner loop: no long fits, no server/PostgreSQL/Chromium/Ray (under 3 minutes on 2 cores).
test-fast: $(STAMP)
	$(BIN)/ruff check actuator_sysid tests bench tools
	$(THREADS) $(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not slow and not service"

bench: $(STAMP)
	$(BIN)/python bench/rollout.py

bench-ingest: $(STAMP)
	$(BIN)/python bench/ingest.py

# ruff (lint, and the format `make format` writes), then the structure check (fails only on violations beyond
# the baseline), then mypy.
lint: $(STAMP)
	$(BIN)/ruff check actuator_sysid tests bench tools
	$(BIN)/ruff format --check actuator_sysid tests bench tools
	$(BIN)/python tools/check_structure.py --baseline tools/structure_baseline.txt
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format actuator_sysid tests bench tools

structure: $(STAMP)
	$(BIN)/python tools/check_structure.py --baseline tools/structure_baseline.txt

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache data
