# wikilog: `make serve` to try it, `make test` to check it.
SWIFT ?= swift
DB ?=

.PHONY: bootstrap build test serve bench compare-log clean

bootstrap:
	@scripts/bootstrap

build: bootstrap
	$(SWIFT) build

test: bootstrap
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# Until the HTTP server lands, `serve` seeds a demo log in the default data directory (or DB=dir)
# and follows it like `tail -f`: write from another terminal with `wikilog put` to watch.
serve: bootstrap
	$(SWIFT) build --product wikilog
	@bin=$$($(SWIFT) build --show-bin-path)/wikilog; \
	  $$bin demo $(if $(DB),--db $(DB)); \
	  echo "following the log; in another terminal: $$bin put '{\"_id\":\"hello\"}' $(if $(DB),--db $(DB))" >&2; \
	  $$bin log tail --since 0 --follow --format text $(if $(DB),--db $(DB))

bench:
	WIKILOG_BENCHMARKS=1 scripts/bootstrap
	WIKILOG_BENCHMARKS=1 $(SWIFT) package --scratch-path .build-bench benchmark

# The log's workloads on wikilog and on a C program using liblmdb directly, with ratios.
compare-log:
	scripts/compare-log

clean:
	rm -rf .build .build-bench
