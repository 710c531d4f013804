# Likes: one entry point for the local stack, the template checks and the Lambda builds.
# Python tools live in .venv, built from the project's own pinned files; every recipe
# sees .venv/bin first on PATH (cargo finds `cargo-lambda` there, cargo-lambda finds zig).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

PYTHON ?= python3
VENV := .venv
VENV_STAMP := $(VENV)/.installed
REQUIREMENTS := local/requirements.txt
CONSTRAINTS := local/constraints.txt
TARGET_DIR = $${CARGO_TARGET_DIR:-target}
# Every Lambda runs one bootstrap (functions/, bin `likes`, template.yaml's Binary) that
# dispatches on the function's Handler.
BOOTSTRAP := likes
PACKAGES := -p likes-functions
ARM64_TARGET := aarch64-unknown-linux-gnu

# Lints ride on the build: clippy-driver compiles the workspace's own crates (as `cargo clippy`
# has it do, through RUSTC_WORKSPACE_WRAPPER), denying every warning (CLIPPY_ARGS, as `cargo
# clippy -- -D warnings` passes it). The dependencies compile once, for the build, not once
# more for a check; cargo keeps these artifacts apart from a plain build's, so the tests below
# run on them without building again.
LINTED := RUSTC_WORKSPACE_WRAPPER=clippy-driver CLIPPY_ARGS=-Dwarnings

export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export SAM_CLI_TELEMETRY := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: .venv chromium lock lint-template lint-openapi test-web check build build-native check-bootstrap run reconcile test bench-write bench-counts bench-reads bench-cold-start bench-scale bench-reconcile bench-reconcile-size bench-live bench-moderation

# Rebuilt from scratch whenever the pins change, so .venv is exactly the lock.
$(VENV_STAMP): $(REQUIREMENTS) $(CONSTRAINTS)
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r $(REQUIREMENTS) -c $(CONSTRAINTS)
	touch $@

.venv: $(VENV_STAMP)

# Debian's Chromium, for the web client's browser test (tests/browser/web_client.py):
# installed from the machine's package manager when missing (Debian's security updates
# replace its version, so it is the distribution's current one, not a pin). The package
# lists are refreshed only when the install cannot find it.
CHROMIUM := /usr/bin/chromium
APT := $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get
$(CHROMIUM):
	$(APT) install -y --no-install-recommends chromium || \
	  { $(APT) update && $(APT) install -y --no-install-recommends chromium; }

chromium: $(CHROMIUM)

# Re-resolve requirements.txt from scratch and rewrite constraints.txt.
lock:
	rm -rf $(VENV)-lock
	$(PYTHON) -m venv $(VENV)-lock
	$(VENV)-lock/bin/pip install --quiet -r $(REQUIREMENTS)
	{ sed -n '/^#/p;/^#/!q' $(CONSTRAINTS); $(VENV)-lock/bin/pip freeze --all --exclude pip; } > $(CONSTRAINTS).new
	if cmp -s $(CONSTRAINTS).new $(CONSTRAINTS); then rm $(CONSTRAINTS).new; else mv $(CONSTRAINTS).new $(CONSTRAINTS); fi
	rm -rf $(VENV)-lock

# All run offline: sam validate --lint translates the SAM transform locally and runs cfn-lint;
# checkov scans the template for security misconfigurations and fails on any failed check that
# the template does not skip (each skip is a comment beside its resource, with its reason:
# docs/operations.md lists them). --skip-download and CKV_SKIP_PACKAGE_UPDATE_CHECK keep it off
# the network (no platform calls, no version check); --quiet prints only the failed checks.
lint-template: .venv
	cfn-lint template.yaml
	sam validate --lint --region us-east-1 --template-file template.yaml
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true checkov --file template.yaml --framework cloudformation \
	  --skip-download --quiet --compact

# The API document is OpenAPI 3.1 (pinned openapi-spec-validator, offline). That it lists exactly
# the template's routes, and that the local front answers as it says, are tests in
# tests/tests/suite/contract.rs (schemathesis, every check but `unsupported_method`: API Gateway
# answers an undeclared method 404, not 405, and the local front answers as AWS does).
lint-openapi: .venv
	openapi-spec-validator openapi.yaml

# The web client's count arithmetic (web/item.js), without a browser: Node's own test runner.
test-web:
	node --test web/

# The quick check while changing code: formatting, lints, each crate's unit tests, the web
# client's arithmetic, and the fast tier: every integration and end-to-end test that can run
# on AWS simulated in the test's own process (local/simulator) rather than the emulator, so
# no Python and no waiting on it (.config/nextest.toml's `fast` profile says which).
# `make test` is the whole suite, and what CI runs.
FAST_TIER := LIKES_TEST_AWS=simulator $(LINTED) cargo nextest run --profile fast
check:
	cargo fmt --all -- --check
	$(LINTED) cargo build --workspace --all-targets
	$(FAST_TIER) --workspace
	$(MAKE) --no-print-directory test-web

# The release bootstrap for the template's Architectures: [arm64], cross-linked by zig.
build: .venv
	@if ! ls "$$(rustc --print target-libdir --target $(ARM64_TARGET))"/libstd-*.rlib >/dev/null 2>&1; then \
	  echo "make build: the Rust standard library for $(ARM64_TARGET) is not installed." >&2; \
	  echo "  The template deploys arm64 (Graviton) functions, so cargo lambda build --arm64 needs it." >&2; \
	  echo "  Add it with:  rustup target add $(ARM64_TARGET)   (needs network access to the Rust dist server)" >&2; \
	  echo "  Without it, 'make build-native' builds an x86_64 bootstrap to prove packaging." >&2; \
	  exit 1; \
	fi
	cargo lambda build --release --arm64 $(PACKAGES)
	@$(MAKE) --no-print-directory check-bootstrap

# A debug bootstrap for the host (x86_64): proves the functions package, no cross std needed.
build-native: .venv
	cargo lambda build $(PACKAGES)
	@$(MAKE) --no-print-directory check-bootstrap

# The build must have produced target/lambda/likes/bootstrap.
check-bootstrap:
	@b="$(TARGET_DIR)/lambda/$(BOOTSTRAP)/bootstrap"; \
	  if [ ! -x "$$b" ]; then echo "missing $$b" >&2; exit 1; fi; \
	  echo "$$b $$(stat -c %s "$$b") bytes"

# The whole service on this machine: emulator, resources from template.yaml, the HTTP API on
# 127.0.0.1:3000, stream pollers. Ctrl-C stops everything it started.
# PARAMETERS="RecountEngine=athena ..." sets template parameters as a deploy would.
run: .venv
	cargo run -p likes-local --bin likes-local -- run $(foreach p,$(PARAMETERS),--parameter $(p))

# One whole reconciliation now against the stack `make run` started (or AWS_ENDPOINT_URL),
# with progress and the drift report; AT=2026-12-01T10:00:00Z cuts at an earlier time.
reconcile: .venv
	cargo run -q -p likes-local --bin likes-local -- reconcile $(if $(AT),--at $(AT)) $(if $(WAIT),--wait)

# Everything a change must pass: formatting, lints, the template and API document checks,
# the bootstrap every function runs, the fast tier on the simulator (a minute; what it finds
# it finds first), then unit, integration and end-to-end tests (the
# schemathesis run against the local front and the web client in Chromium included), each
# test on an emulator of its own that its process starts and stops (.config/nextest.toml
# says how many run at once and which start first). The lints, the bootstrap and the tests
# are one build, so the dependencies compile once; the bootstrap is put where cargo lambda puts it
# (`make build-native` builds it through cargo lambda itself).
# The Python tools and Chromium install while the Rust code compiles (none needs another).
test:
	@$(MAKE) --no-print-directory .venv > $(VENV).log 2>&1 & venv=$$!; \
	  $(MAKE) --no-print-directory chromium > .chromium.log 2>&1 & browser=$$!; \
	  status=0; \
	  { cargo fmt --all -- --check && \
	    $(LINTED) cargo build --workspace --all-targets; } || status=$$?; \
	  wait $$venv || { cat $(VENV).log >&2; echo "make test: installing .venv failed" >&2; exit 1; }; \
	  wait $$browser || { cat .chromium.log >&2; echo "make test: installing Chromium failed" >&2; exit 1; }; \
	  exit $$status
	$(MAKE) --no-print-directory lint-template
	$(MAKE) --no-print-directory lint-openapi
	$(MAKE) --no-print-directory test-web
	@install -D "$(TARGET_DIR)/debug/$(BOOTSTRAP)" "$(TARGET_DIR)/lambda/$(BOOTSTRAP)/bootstrap"
	@$(MAKE) --no-print-directory check-bootstrap
	$(FAST_TIER) -p likes-tests --test suite
	$(LINTED) cargo nextest run --workspace --no-fail-fast

# Figures, not a timed test: write units, requests and handler CPU per reaction, in a release
# build against a fresh emulator (docs/performance.md).
bench-write: .venv
	cargo run -q -p likes-local --bin likes-local -- exec -- cargo bench -q -p likes-tests --bench write

# Figures, not a timed test: count writes per stream record, write and read units per like and
# per count read, staleness to visible, for the design and a naive counter side by side 
# (docs/performance.md).
bench-counts: .venv
	cargo run -q -p likes-local --bin likes-local -- exec -- cargo bench -q -p likes-tests --bench counts

# Figures, not a timed test: DynamoDB requests and read units per public count read of one
# viral item at 1, 100 and 10,000 reads/s, and per 40-item page, through the real handlers with
# the container's count cache, beside the naive read (a Query per item, no cache); then per
# likers page, unfiltered and with the reader's privacy hiding half the newest likers, which
# it writes into docs/performance.md. They are counts, not times, so a debug build serves (no release build of the
# SDK first); it only caps the rate one container reaches.
bench-reads: .venv
	cargo run -q -p likes-local --bin likes-local -- exec -- cargo bench -q --profile dev -p likes-tests --bench reads

# Figures, not a timed test: one reconciliation over LIKES_BENCH_RECONCILE_ROWS reaction rows
# (100,000) with 1% of items drifted, timed by phase, its S3 requests and read and write units
# per 100K rows, and the run projected to 10^11 rows in the function and with Athena 
# (docs/performance.md).
bench-reconcile: .venv
	cargo run -q -p likes-local --bin likes-local -- exec -- cargo bench -q -p likes-tests --bench reconcile

# What the in-function recount holds and reads per row at sizes past one invocation's memory,
# over exports synthesized in AWS's layout (LIKES_BENCH_RECONCILE_SIZES), and where the
# template's RecountEngine auto sends each.
bench-reconcile-size: .venv
	cargo run -q -p likes-local --bin likes-local -- exec -- cargo bench -q -p likes-tests --bench reconcile_size

# Figures, not a timed test: bootstrap size, and cold start (spawn -> first invocation served)
# of the release bootstrap for the host (x86_64: the arm64 std is not installed here), each
# served one event by a stand-in Runtime API, against a fresh emulator.
bench-cold-start: .venv
	cargo lambda build --release $(PACKAGES)
	@$(MAKE) --no-print-directory check-bootstrap
	cargo run -q -p likes-local --bin likes-local -- exec -- cargo bench -q -p likes-tests --bench cold_start

# Figures, not a timed test: the design and a naive counter at AWS's scale (a viral item at
# 50,000 likes/s over 100,000 reactions/s, 200 stream shards), in simulated time through the
# real likes-core decisions; per-second worst partition key and Kinesis shard against their
# limits, conflicts, staleness. No emulator. Writes docs/scale.svg. Then the ledger: write and
# read units per cold and per viral like, by table and index, from the production functions
# on the simulator, beside a fair batched naive build; written into docs/performance.md, its
# last line the headline. (The functions' metric lines are left out of what it prints.)
bench-scale:
	cargo bench -q -p likes-tests --bench scale
	cargo bench -q --profile dev -p likes-tests --bench ledger | { grep -v '^{"' || true; }

# Figures, not a timed test: live counts with LIKES_BENCH_LIVE_WATCHERS (1,000) WebSocket
# watchers on one item while distinct users like it as fast as the emulator takes writes
# (LIKES_BENCH_LIVE_LIKES, 600): messages per watcher per second, push latency from event time
# p50/p99, the broadcaster's count reads and posts per second (docs/live-counts.md). Counts and
# latencies through the local fronts, so a debug build serves.
bench-live: .venv
	cargo run -q -p likes-local --bin likes-local -- exec -- cargo bench -q --profile dev -p likes-tests --bench live

# Figures, not a timed test: a moderator's retraction of a bot's LIKES_BENCH_RETRACTED (500)
# likes of cold items, on the simulator through the production functions: write and read
# units per retracted reaction by part of the service beside what the likes cost going in,
# and the job's time at the template's ModerationRowsPerSecond and at its maximum, projected
# to 10,000 reactions (docs/performance.md). No emulator; units and a job's pace, so a debug
# build serves. (The functions' metric lines are left out of what it prints.)
bench-moderation:
	cargo bench -q --profile dev -p likes-tests --bench moderation | { grep -v '^{"' || true; }
