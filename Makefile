# The README's two commands: `sudo make demo` (the default experiment) and `sudo make test`.
# Both run scripts/setup.sh first, which installs whatever is missing on a fresh machine.
VENV := .venv
EXPERIMENT ?= topologies/dumbbell-2jobs.yaml
PYTEST_ARGS ?= -ra

.PHONY: setup demo test lint clean-runs uninstall

setup:
	@scripts/setup.sh

demo: setup
	$(VENV)/bin/mn-harness run $(EXPERIMENT)

test: setup
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check mn_harness tests bench
	$(VENV)/bin/mypy

# removes the /usr/local/bin/mn-harness launcher setup installed (the venv stays)
uninstall:
	@scripts/setup.sh --uninstall

clean-runs: setup
	$(VENV)/bin/mn-harness clean
