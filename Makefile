# mentor-push: scenario-based push notifications for a volunteer peer-mentor app.
#   make demo        install what is missing, start a throwaway PostgreSQL, load demo data, run the jobs
#   make test        install what is missing and run every test (a real PostgreSQL, started by the tests)
#   make bench-plan  every scenario job's --dry-run against 100k and 1M generated mentors, beside its bare query
#   make bench-push  100k pushes to the local fake APNs/FCM: push-bench beside h2load, aioapns, firebase-admin
#   make bench-events event-notify at 10, 100 and 1,000 events/s: commit → push accepted percentiles, DB CPU
#   make bench-outbox push-deliver end to end beside push-bench (100k; 1 and 2 connections each), and at 50 ms latency with 1/2/4 workers, 4 processes
#   make migrate     apply sql/migrations to $$DATABASE_URL

SWIFT ?= swift
BENCH_SIZES ?= 100000 1000000

.PHONY: deps build release test demo bench-plan bench-push bench-events bench-outbox migrate clean

deps:
	@scripts/install-deps

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test

demo: build
	scripts/demo

bench-plan: release
	@scripts/install-deps --bench
	scripts/bench-plan $(BENCH_SIZES)

# scripts/bench-push builds the two release products it needs (fake-push, push-bench) and the Python venv.
bench-push: deps
	@scripts/install-deps --bench
	scripts/bench-push

bench-events: release
	scripts/bench-events

bench-outbox: release
	scripts/bench-outbox

migrate: build
	.build/debug/migrate

clean:
	rm -rf .build
