# agentloop — one Makefile for people and CI. `.ci/run` runs `make lint doc` and `make test` (= `make ci`).
CARGO ?= cargo
BIN := target/debug/agentloop
PREFIX ?= /usr/local

.PHONY: doc build test check-lean conformance test-ductile test-real test-real-mcp test-real-harness lint ci install demo bench bench-real man clean

build:
	$(CARGO) build --locked

## test: every unit and integration test (offline; fake servers on 127.0.0.1 only), then the
## lean build's checks (check-lean)
test:
	$(CARGO) test --locked
	$(MAKE) check-lean

## check-lean: the build without its optional parts (--no-default-features: no mcp, queue, otel
## or serve) is clippy-clean, its unit tests pass, and its binary (copied to target/lean)
## names what it left out and refuses each way to it naming the feature (tests/lean.sh). Built in
## the one target folder, so the dependencies both builds share are compiled once; the full
## binary is linked back at the end.
check-lean:
	$(CARGO) clippy --locked --workspace --no-default-features -- -D warnings
	$(CARGO) test --locked --workspace --no-default-features --lib
	$(CARGO) build --locked --no-default-features
	mkdir -p target/lean
	cp target/debug/agentloop target/lean/agentloop
	$(CARGO) build --locked
	tests/lean.sh target/lean/agentloop

## conformance: only the suites other people wrote: openapi-spec-validator, and schemathesis with its
## five response checks against a served root (tests/it/conformance.rs; from PyPI, on PATH), and the
## official MCP conformance suite in client mode (tests/it/mcp_conformance.rs; node 22 and the suite
## from npm in $XDG_CACHE_HOME/agentloop-mcp-conformance). .ci/run installs them; bounded (a few
## minutes at most). Part of `make test` too (skipped there, saying so, without them; a failure under CI).
conformance:
	$(CARGO) test --locked --test it conformance:: -- --nocapture

## test-ductile: only the tests against the real Ductile (tests/it/ductile_real.rs): build it first
## with ../shared/ductile/install.sh; DUCTILE_BIN (default
## ${XDG_CACHE_HOME:-$HOME/.cache}/agentloop-ductile/bin/ductile) and DUCTILE_PLUGINS say where it is.
## Part of `make test` too (skipped there, saying so, without Ductile; a failure under CI).
test-ductile:
	$(CARGO) test --locked --test it ductile_real:: -- --nocapture

## test-real: a few goals against the real OpenAI-compatible server at AGENTLOOP_REAL_BASE_URL
## (skipped when unset; optional AGENTLOOP_REAL_MODEL, default smollm2, AGENTLOOP_REAL_LOG,
## the server's access log, checked for HTTP 5xx, and AGENTLOOP_REAL_CHAT_FORMAT, the server's
## chat format: `models test` must flag upstream chatml-function-calling's dropped tool results).
## Checks every answer was taken or refused with the error shown, each answer within its cap and
## each read timeout on record; then prints the bundled smoke suite's pass table (`agentloop eval
## --builtin smoke`; AGENTLOOP_REAL_EVAL_TRIALS trials per case, default 1). Not part of `make test` or CI: no real model server runs there.
test-real:
	@if [ -z "$$AGENTLOOP_REAL_BASE_URL" ]; then \
		echo "test-real skipped: set AGENTLOOP_REAL_BASE_URL (e.g. http://127.0.0.1:8088/v1)"; \
	else \
		$(CARGO) test --locked --test it real:: -- --ignored --nocapture; \
		$(CARGO) test --locked --test it eval::the_smoke_suite_against_a_real_server -- --ignored --nocapture; \
	fi
	@if [ -d "$${HARNESS_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/agentloop-harness}/mcp" ]; then $(MAKE) test-real-mcp; else echo "test-real-mcp skipped: no harness MCP servers"; fi

## test-real-harness: test-real against ../shared/harness's llama-cpp-python server, once with
## the upstream chat handler and once with the fixed one (HARNESS_DIR overrides where it lives)
test-real-harness:
	tests/real-harness.sh

## test-real-mcp: MCP tests against the real reference servers (install them first with
## ../shared/harness/install.sh; HARNESS_DIR overrides where they are)
test-real-mcp:
	HARNESS_DIR="$${HARNESS_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/agentloop-harness}" \
		$(CARGO) test --locked --test it mcp_real -- --ignored --test-threads=1 --nocapture

## lint: formatting and clippy with warnings as errors
lint:
	bash -n .ci/run
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

## doc: the API docs, with rustdoc warnings as errors
doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --document-private-items --locked

## ci: what .ci/run runs on a clean checkout: lint, doc, test
ci: lint doc test

install:
	$(CARGO) install --locked --path . --root $(PREFIX)
	install -d $(PREFIX)/share/man/man1
	install -m 644 man/agentloop.1 $(PREFIX)/share/man/man1/agentloop.1

## demo: a full Frame → Plan → Act → Reflect run, offline: the scripted model drives real tools;
##       ends with its HTML report in demo-ws/report.html
demo: build
	rm -rf demo-ws
	$(BIN) -w demo-ws --script examples/critique/script.yaml --config examples/critique/agentloop.yaml \
		run --goal "Write a two-paragraph critique of the bundled article" --context examples/critique/context.md
	@echo
	@echo "== artifacts/critique.md"; cat demo-ws/artifacts/critique.md
	@echo "== trace"; $(BIN) -w demo-ws trace show --color never
	@echo
	@echo "The paper trail is in demo-ws/: context.md memory.md plan.md decisions.md trace.jsonl state.json result.json artifacts/"
	@$(BIN) -w demo-ws report -q >/dev/null
	@echo "The run's report is in demo-ws/report.html: open it in a browser."

## bench: loop overhead per step (scripted model and a local HTTP fake), prompt size growth,
## prompt tokens of a 31-step run and what a prefix cache would not cover (beside llm's and
## smolagents' figures), trace reading, memory search, the release binary's size and `--version`'s
## start-up (benches/loop.rs); MCP tool listing from the cache and cold server starts
## (benches/mcp.rs); runs per minute of 1, 2, 4 and 8 `agentloop worker`s against a model
## answering after 200 ms, then of 1, 8, 16 and 32 lanes (workers of 8), with where the CPU went
## (benches/queue.rs, needs redis-server; QUEUE_LANES, QUEUE_CONCURRENCY override);
## steps and prompt tokens a skill learned from day 1's run saves day 2 (benches/learn.rs)
bench:
	$(CARGO) bench --locked --bench loop
	$(CARGO) bench --locked --bench mcp
	$(CARGO) bench --locked --bench queue
	QUEUE_LANES=1,8,16,32 QUEUE_CONCURRENCY=8 $(CARGO) bench --locked --bench queue
	$(CARGO) bench --locked --bench learn

## bench-real: one fixed goal on the harness's SmolLM2 server (../shared/harness), with the shared
## prompt prefix and without it: the share of prompt tokens served from the server's prefix cache
## from the second call on, the median wall time per step, HTTP 5xx (skipped without the harness;
## BENCH_STEPS, BENCH_GOAL, BENCH_PORT, BENCH_MODES override); then the bundled smoke suite
## (`agentloop eval --builtin smoke`) once per chat format, printing its pass table (benches/smoke.sh;
## SMOKE_TRIALS, SMOKE_FORMATS, SMOKE_PORT override). Takes long: one CPU thread.
bench-real: build
	benches/real.sh
	benches/smoke.sh

## man: regenerate the committed man page from the CLI definition
man: build
	$(BIN) man > man/agentloop.1

clean:
	rm -rf target demo-ws
