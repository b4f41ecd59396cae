# goroce — the two newcomer commands are `make demo` and `make test`.

GO        ?= go
PKGS      := ./...
FUZZTIME  ?= 10s
BENCHTIME ?= 1s
OUT       ?= out
export CGO_ENABLED ?= 0

.PHONY: all build test vet cross fuzz bench bench-cq bench-smc bench-smc-scale demo clean tshark-check

all: build

## build: compile every package and command (pure Go, no cgo)
build:
	$(GO) build $(PKGS)
	$(GO) build -o bin/ ./cmd/...

## vet: gofmt and go vet
vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## cross: build and vet for the other systems goroce runs on (no run): the
## portable UDP backend and every tool must compile there
CROSS_GOOS ?= darwin freebsd windows
cross:
	@set -e; for os in $(CROSS_GOOS); do echo "GOOS=$$os go build + vet"; \
	  GOOS=$$os $(GO) build $(PKGS); GOOS=$$os $(GO) vet $(PKGS); done

## test: vet, the cross-builds, every test with the race detector (needs cgo
## for -race), then the allocation tests again without it (its
## instrumentation allocates, so they skip under -race)
test: vet cross
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 10m $(PKGS)
	$(GO) test -count=1 -run 'NotAllocate' $(PKGS)

## fuzz: a short run of every fuzz target (FUZZTIME each, default 10s)
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

## bench: every benchmark, with allocations
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) $(PKGS)

## bench-cq: the CQ-pool experiment (legacy vs pooled completions vs TCP); CQDURATION per measurement
CQDURATION ?= 5s
bench-cq:
	@mkdir -p $(OUT)
	$(GO) build -o bin/ ./cmd/cq-bench
	./bin/cq-bench -duration $(CQDURATION) -csv $(OUT)/cq-bench.csv

## bench-afpacket: as root, roce-perf over veth between two namespaces, AF_PACKET (recvmmsg, TPACKET_V3 ring) vs UDP backend interleaved (ROUNDS, BENCHSECS)
ROUNDS ?= 3
BENCHSECS ?= 2
.PHONY: bench-afpacket
bench-afpacket: build
	./scripts/afpacket-bench.sh $(ROUNDS) $(BENCHSECS)

## bench-smc: the CQ-pooling experiment on SMC-R (redis and uperf over TCP, SMC-R original, SMC-R pool); SMCFLAGS=-quick for a one-minute run
SMCFLAGS ?=
bench-smc:
	@mkdir -p $(OUT)
	$(GO) build -o bin/ ./cmd/smc-bench
	./bin/smc-bench $(SMCFLAGS) -csv $(OUT)/smc-bench.csv -svg $(OUT)/smc-bench.svg
	./bin/smc-bench -scale 512

## bench-smc-scale: hold SMCSCALE SMC-R connections (default 4096), memory per idle connection, leak check after close
SMCSCALE ?= 4096
bench-smc-scale:
	$(GO) build -o bin/ ./cmd/smc-bench
	./bin/smc-bench -scale $(SMCSCALE)

## demo: the main job (see README)
demo: build
	@./scripts/demo.sh $(OUT)

## tshark-check: compare rocedump -json with tshark -T json on every bundled capture and on goroce's own RDMA CM captures (needs tshark)
tshark-check: build
	@./scripts/tshark-check.sh conformance/testdata/rxe/*.pcap

## interop: as root, boot Linux's rxe under QEMU and run rdma-core's programs against goroce's, then the kernel's SMC-R against goroce's (INTEROP_FLAGS: see conformance/interop/README.md)
.PHONY: interop
interop:
	$(GO) build -o bin/ ./cmd/rc_pingpong ./cmd/uc_pingpong ./cmd/ud_pingpong ./cmd/srq_pingpong \
		./cmd/ib_send_bw ./cmd/ib_write_bw ./cmd/ib_read_bw ./cmd/ib_atomic_bw \
		./cmd/ib_send_lat ./cmd/ib_write_lat ./cmd/ib_read_lat ./cmd/rocedump ./cmd/rping ./cmd/ucmatose ./cmd/udaddy \
		$(if $(wildcard cmd/smcat),./cmd/smcat) \
		$(if $(wildcard cmd/smc-relay),./cmd/smc-relay ./cmd/roce-devinfo) \
		$(if $(wildcard cmd/smcr),./cmd/smcr)
	$(GO) run ./conformance/interop $(INTEROP_FLAGS)

clean:
	rm -rf bin $(OUT)
