# doodlepod developer entry points. `make help` lists them.
SHELL := /bin/bash
DOODLEPOD_CACHE ?= $(HOME)/.cache/doodlepod
# The shared venv (third-party requirements, reused by every checkout) and this checkout's own venv
# on top of it (.venv/: this checkout's code, kernels and console scripts; scripts/bootstrap.sh).
VENV ?= $(DOODLEPOD_CACHE)/venv
CHECKOUT_VENV := $(CURDIR)/.venv
PY := $(CHECKOUT_VENV)/bin/python
BIN := $(CHECKOUT_VENV)/bin
export DOODLEPOD_CACHE VENV

.PHONY: help venv venv-app lint test test-fast rehearse
help: ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

venv: ## create/update the dev virtualenv: the shared one (outside the repo, reused while requirements are unchanged) and this checkout's .venv/
	@DOODLEPOD_VENV=$(VENV) scripts/bootstrap.sh

venv-app: ## only what the app needs: its requirements, this checkout's .venv and kernels (no torch, no model stack; make run starts with it)
	@DOODLEPOD_VENV=$(VENV) scripts/bootstrap.sh --app

lint: venv ## ruff: pycodestyle, pyflakes and import order (settings in pyproject.toml)
	$(BIN)/ruff check . && $(BIN)/lint-imports

test: venv lint ## install what is needed, lint, and run every test
	$(PY) -m pytest -q tests

rehearse: ## CI on a clean machine: `make test` in a fresh Debian bookworm container that holds only the README's prerequisites, on a clone of HEAD; prints each phase's time and the load (root, podman; docs/deployment.md)
	@scripts/rehearse.sh

FAST_TESTS := not e2e and not model_stack and not browser and not redis and not pod
test-fast: venv ## only the tests that need no server, model stack, browser or Redis (under a minute)
	$(PY) -m pytest -q -n auto -m "$(FAST_TESTS)" tests

# --- run the whole kit locally ---
.PHONY: run
run: ## start the app, Redis, a render worker and TorchServe (CPU) locally on embedded defaults; a fresh machine gets the app first, the model server when its stack is built; Ctrl-C stops all
	@DOODLEPOD_VENV=$(VENV) scripts/run_local.sh

# --- the app: its servers and load benchmarks ---
.PHONY: serve-app bench-load bench-soak bench-soak-shares
serve-app: venv ## only the app (gunicorn, gevent workers) on DOODLEPOD_* settings; TorchServe must be running
	$(BIN)/gunicorn -c app/gunicorn_conf.py "app:create_app()"

bench-load: venv ## load benchmark: fake-model TorchServe + app, 1 client then 16 clients for 60 s; BASELINE=REF also runs our app at that git ref, A/B (bench/load.py --help)
	$(PY) bench/load.py $(if $(BASELINE),--baseline-ref $(BASELINE))

bench-soak: venv ## soak: 16 good, slow and hostile clients for 60 s against one pod; PASS/FAIL per criterion (bench/soak.py --help)
	$(PY) bench/soak.py

bench-soak-shares: venv ## shares soak: good clients quiet, then beside clients that each try to take a shared pool; PASS/FAIL per criterion
	$(PY) bench/soak.py --shares

.PHONY: bench-jobs serve-worker
bench-jobs: venv ## async jobs benchmark: 200 jobs by 16 clients on Redis + 2 render workers, then the same renders synchronously (bench/jobs.py --help)
	$(PY) bench/jobs.py

serve-worker: venv ## only the render worker (python -m app.worker) on DOODLEPOD_* settings; Redis and TorchServe must be running
	$(PY) -m app.worker

# --- the model server: archives, weights, TorchServe ---
MODEL_STORE ?= build/model-store
WEIGHTS_DIR ?= $(DOODLEPOD_CACHE)/weights
.PHONY: archives archives-released fetch-weights serve-models lint-model-image
archives: venv ## build the tiny random-init .mar archives into $(MODEL_STORE) (offline, seconds; tests and CPU runs)
	$(PY) scripts/build_archives.py --tiny --out $(MODEL_STORE)

fetch-weights: ## download AnimatedDrawings' released detector/pose archives into $(WEIGHTS_DIR) (needs internet)
	scripts/fetch_weights.sh $(WEIGHTS_DIR)

archives-released: venv fetch-weights ## convert the released weights to the pinned stack and archive them into $(MODEL_STORE)
	$(PY) scripts/build_archives.py --weights-dir $(WEIGHTS_DIR) --out $(MODEL_STORE)

serve-models: venv ## only TorchServe (CPU) on 127.0.0.1:8080-8082 with the archives in $(MODEL_STORE); Ctrl-C stops it
	$(PY) -m handlers.torchserve_local --model-store $(MODEL_STORE)

lint-model-image: venv ## hadolint Dockerfile.model
	$(BIN)/hadolint Dockerfile.model

# --- rendering: benchmark and the docs' example GIF ---
.PHONY: bench-render example-gif
bench-render: venv ## render benchmark: char1 + dab, every frame, 500x500, whole processes, beside Pillow's own GIF writing; BASELINE=REF also times our code at that git ref, A/B (bench/render.py --help)
	$(PY) bench/render.py $(if $(BASELINE),--baseline-ref $(BASELINE) --stages)

example-gif: venv ## re-render docs/example.gif from the fixtures
	cd tests/fixtures/animated_drawings && PYTHONPATH=$(CURDIR) $(PY) -m animator examples/characters/char1 \
	  --motion examples/config/motion/jumping_jacks.yaml --retarget examples/config/retarget/cmu1_pfp.yaml \
	  -o $(CURDIR)/docs/example.gif --size 280x280 -v

# --- containers: the two images and pod.yaml run by a container engine ---
.PHONY: images pod pod-down
images: ## build doodlepod-app:0.1.0, doodlepod-worker:0.1.0 and the CPU model image doodlepod-model:0.1.0-cpu with podman or docker (docs/deployment.md)
	@scripts/images.sh

pod: images ## run pod.yaml with podman play kube (CPU overlay) + deploy/redis.yaml's Redis; waits for /ping 200; Ctrl-C removes it
	@scripts/pod.sh up

pod-down: ## remove everything `make pod` started (pods, volumes, network)
	@scripts/pod.sh down
