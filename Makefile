# doodlepod developer entry points. `make help` lists them.
SHELL := /bin/bash
DOODLEPOD_CACHE ?= $(HOME)/.cache/doodlepod
VENV ?= $(DOODLEPOD_CACHE)/venv
PY := $(VENV)/bin/python
export DOODLEPOD_CACHE VENV

.PHONY: help venv test
help: ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

venv: ## create/update the dev virtualenv (outside the repo, reused while requirements are unchanged)
	@DOODLEPOD_VENV=$(VENV) scripts/bootstrap.sh

test: venv ## install what is needed and run every test
	$(PY) -m pytest -q tests

# --- deploy (issue 4) ---
.PHONY: run
run: venv ## start TorchServe (CPU) + the app locally on embedded defaults; Ctrl-C stops both
	@scripts/run_local.sh

# --- app (issue 3) ---
.PHONY: serve-app bench-load
serve-app: venv ## only the app (gunicorn, gevent workers) on DOODLEPOD_* settings; TorchServe must be running
	$(VENV)/bin/gunicorn -c app/gunicorn_conf.py "app:create_app()"

bench-load: venv ## load benchmark: fake-model TorchServe + app, 1 client then 16 clients for 60 s (bench/load.py --help)
	$(PY) bench/load.py
