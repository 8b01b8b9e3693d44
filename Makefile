# Shortcuts for developers; CI runs scripts/test.sh (all targets).
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: help setup dev test host lint vm aarch64 format benchmarks-docs demo

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-16s %s\n", $$1, $$2}'

setup:  ## venv, dependencies and a release build (scripts/setup.sh)
	scripts/setup.sh

dev:  ## a quick rebuild of the extension after a Rust change (no LTO)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH=$(CURDIR)/$(VENV)/bin:$$PATH maturin develop --profile quick

test:  ## everything CI runs
	scripts/test.sh

host:  ## Rust tests, the criterion benches once each, pytest on this machine
	scripts/test.sh host

lint:  ## rustfmt, clippy, stubtest, mypy --strict, docs/benchmarks.md current
	scripts/test.sh lint

vm:  ## the real-kernel tests inside a VM
	scripts/test.sh vm

aarch64:  ## the aarch64 wheel and Rust core under qemu
	scripts/test.sh aarch64

format:  ## rustfmt the Rust sources
	cargo fmt

benchmarks-docs:  ## docs/benchmarks.md from benches/results/*.json
	$(PY) scripts/render_benchmarks.py

demo:  ## set up and run npu-zc demo
	scripts/demo.sh
