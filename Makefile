# wikilog: `make serve` to try it, `make test` to check it.
SWIFT ?= swift
DB ?=

.PHONY: bootstrap build test serve bench compare compare-log clean

bootstrap:
	@scripts/bootstrap

build: bootstrap
	$(SWIFT) build

test: bootstrap
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# Until the HTTP server lands, `serve` seeds a demo log in the default data directory (or DB=dir)
# and follows it like `tail -f`: append from another terminal with `wikilog append` to watch.
serve: bootstrap
	$(SWIFT) build --product wikilog
	@bin=$$($(SWIFT) build --show-bin-path)/wikilog; \
	  $$bin demo $(if $(DB),--db $(DB)); \
	  echo "following the log; in another terminal: echo hi | $$bin append --type note $(if $(DB),--db $(DB))" >&2; \
	  $$bin tail --since 0 --follow --format text $(if $(DB),--db $(DB))

bench:
	WIKILOG_BENCHMARKS=1 scripts/bootstrap
	WIKILOG_BENCHMARKS=1 $(SWIFT) package --scratch-path .build-bench benchmark

# wikilog's log and document workloads, then the same work in C on liblmdb and on SQLite, one
# after another; prints the table and writes it to docs/benchmarks.md (see there).
compare:
	scripts/compare

# The log's workloads on wikilog and on a C program using liblmdb directly, with ratios.
compare-log:
	scripts/compare-log

clean:
	rm -rf .build .build-bench
