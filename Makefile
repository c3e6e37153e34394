# wikilog: `make serve` to try it, `make test` to check it.
SWIFT ?= swift
DB ?=
PORT ?=

.PHONY: bootstrap build test serve bench compare compare-search compare-log fuzz docs clean

bootstrap:
	@scripts/bootstrap

build: bootstrap
	$(SWIFT) build

# The command-line tests (child processes, waited for on blocking calls) run apart from the
# others: run together they hold the two cooperative threads of this machine for minutes, and
# the in-process servers' tests starve.
test: bootstrap
	scripts/check-seams
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --skip CLITests
	$(SWIFT) test --skip-build --filter CLITests

# Seeds the demo wikis into the database "wiki" of the default data directory (or DB=dir) when
# it is empty, makes the demo's sign-ins (admin, alice, bob, carol; printed), then serves every
# database there over CouchDB's HTTP API (PORT=5984 by default).
serve: bootstrap
	$(SWIFT) build --product wikilog
	@bin=$$($(SWIFT) build --show-bin-path)/wikilog; \
	  $$bin demo --users $(if $(DB),--db $(DB)) && \
	  exec $$bin serve $(if $(DB),--db $(DB)) $(if $(PORT),--port $(PORT))

bench:
	WIKILOG_BENCHMARKS=1 scripts/bootstrap
	WIKILOG_BENCHMARKS=1 $(SWIFT) package --scratch-path .build-bench benchmark

# wikilog's log and document workloads, then the same work in C on liblmdb and on SQLite, one
# after another, and (with COUCHDB_URL) the HTTP workloads beside a CouchDB; prints the table
# and writes it to docs/benchmarks.md (see there).
compare:
	scripts/compare

# Issue 56: wikilog's full-text index as the wiki grows (pages/s per batch, index size, query
# times) beside SQLite FTS5 on the same pages; BATCH, BATCHES, ROUNDS in the environment.
# `scripts/compare-search --write` also puts its table into docs/benchmarks.md.
compare-search:
	scripts/compare-search

# The log's workloads on wikilog and on a C program using liblmdb directly, with ratios.
compare-log:
	scripts/compare-log

# libFuzzer targets (Fuzz/), address sanitizer on, each run for FUZZ_TIME seconds (900 by
# default) on its corpus in Fuzz/corpus/; see Fuzz/README.md.
fuzz: bootstrap
	scripts/fuzz

# The DocC documentation of every library product, in .build/docs/<Module>.
DOC_TARGETS = Formats JSON Log RevTree Projections Query Wiki Auth Replication CouchAPI CouchQuery \
	TypedDocuments \
	WikiMarkdown WikiApp
docs: bootstrap
	mkdir -p .build/docs
	for t in $(DOC_TARGETS); do \
	  $(SWIFT) package --disable-sandbox --allow-writing-to-directory .build/docs \
	    generate-documentation --target $$t \
	    --output-path .build/docs/$$t || exit 1; \
	done

clean:
	rm -rf .build .build-bench .build-fuzz
