PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: test test-cpu demo bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,examples,mpi]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q tests

# the whole suite with every gradient compiled by the cpu backend (slow: one Numba
# compile per distinct graph; the kernel cache makes a second run fast)
test-cpu: $(STAMP)
	JITTAPE_BACKEND=cpu JITTAPE_TEST_CPU_FULL=1 $(PY) -m pytest -q tests \
		-W "error::jittape.compiler.backends.cpu.CompileWarning"

# the README's main job: an MLP on scikit-learn's digits with a @jt.function step
# (exits non-zero below 95% test accuracy)
demo: $(STAMP)
	$(PY) examples/train_digits.py

# the benchmarks (pytest-benchmark), grouped by workload, with the machine's ceilings;
# the JSON goes to bench.json, then one table per group with the ratios to numpy and to
# the floors. Compare two runs: $(PY) benchmarks/compare.py OLD.json bench.json
bench: $(STAMP)
	$(PY) -m pytest benchmarks -q --benchmark-group-by=group \
		--benchmark-columns=median,iqr,rounds --benchmark-json=bench.json -p no:cacheprovider
	$(PY) benchmarks/report.py bench.json

lint: $(STAMP)
	$(PY) -m pip install --quiet ruff
	$(VENV)/bin/ruff check jittape passes tests examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
