# agentloop — one Makefile for people and CI. `.ci/run` runs `make test` word for word.
CARGO ?= cargo
BIN := target/debug/agentloop
PREFIX ?= /usr/local

.PHONY: build test lint ci install demo bench man clean

build:
	$(CARGO) build --locked

## test: every unit and integration test (offline; fake servers on 127.0.0.1 only)
test:
	$(CARGO) test --locked

## lint: formatting and clippy with warnings as errors
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

ci: lint test

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

## bench: loop overhead per step and prompt size growth (see benches/loop.rs)
bench:
	$(CARGO) bench --locked --bench loop

## man: regenerate the committed man page from the CLI definition
man: build
	$(BIN) man > man/agentloop.1

clean:
	rm -rf target demo-ws
