# The README's two commands: `sudo make demo` (dctcp against MLTCP-DCTCP on the MLTCP demo, four
# jobs started together, DEMO_REPEAT rounds with 95% CIs; with EXPERIMENT=<file>, one run of
# that file) and `sudo make test`.
# Both run scripts/setup.sh first, which installs whatever is missing on a fresh machine.
VENV := .venv
DEMO ?= topologies/dumbbell-4jobs-ecn.yaml
DEMO_CCS ?= dctcp,mltcp-dctcp
DEMO_REPEAT ?= 3
PYTEST_ARGS ?= -ra
EXTRAS ?=
CLUSTER ?=

.PHONY: setup demo test lint clean-runs uninstall

setup:
	@EXTRAS="$(EXTRAS)" CLUSTER="$(CLUSTER)" scripts/setup.sh

demo: setup
ifdef EXPERIMENT
	$(VENV)/bin/mn-harness run $(EXPERIMENT)
else
	$(VENV)/bin/mn-harness compare $(DEMO) --cc $(DEMO_CCS) --repeat $(DEMO_REPEAT)
endif

test: setup
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check mn_harness tests bench examples
	$(VENV)/bin/mypy

# removes the /usr/local/bin/mn-harness launcher setup installed (the venv stays)
uninstall:
	@scripts/setup.sh --uninstall

clean-runs: setup
	$(VENV)/bin/mn-harness clean
