# supergw — one IPsec super gateway from N Linux gateways and a P4 switch.
# `make help` lists the targets. Every target that needs tools installs them first.

SHELL      := /bin/bash
VENV       := .venv
PY         := $(VENV)/bin/python
TARGET     ?= ebpf
RESULTS    := build/test-results
SWITCH_BIN := targets/ebpf/bin/supergw-switch
# p4c's BMv2 JSON (p4src/build.sh); Python reads the path from topologies/configs.py.
P4_JSON    := build/p4/supergw.json
# What the JSON is compiled from: `make ptf TARGET=bmv2`, `make integration` and
# `make run SWITCH=bmv2` recompile only when one of these is newer than it.
P4_INPUTS  := $(wildcard p4src/common/*.p4 p4src/v1model/*.p4 p4src/v1model/include/*.p4 \
                 p4src/v1model/include/control/*.p4) p4src/v1model/supergw.p4info.txtpb p4src/build.sh
# p4c and BMv2: the prebuilt toolchain lives in /opt/p4tools; p4lang's packages and a
# source build install into /usr or /usr/local, already on PATH.
export PATH := $(if $(wildcard /opt/p4tools/bin),/opt/p4tools/bin:)$(PATH)

.PHONY: help deps p4 constants switch hostsim run mininet stop test unit ptf integration bench chaos format clean \
        package package-lock package-check deploy-test

help:
	@echo "make run          boot the whole emulated system (switch, controller, gateways; SWITCH=bmv2 on BMv2)"
	@echo "                  TOPO=two-site: two super gateways (switch + controller + N gateways each) paired over a WAN"
	@echo "                  TOPO=remote-access [GATEWAYS=N] [CLIENTS=M]: N gateways behind the outside switch, M strongSwan clients on one public address"
	@echo "                  HA=1: three controller replicas (at every site) on a three-member etcd cluster (leader election, takeover)"
	@echo "                  TLS=1: REST API over https and P4Runtime over mutual TLS (certificates from supergw-gateway pki)"
	@echo "make stop         stop what 'make run' started"
	@echo "make hostsim      build topologies/hostsim (simulated hosts and traffic generator of the two-site emulation)"
	@echo "make mininet      'make run' as a Mininet network, then the Mininet CLI (mininet> h1 ping r1)"
	@echo "make test         unit tests + make p4 + PTF on eBPF and BMv2 + integration tests + packages + deploy test"
	@echo "make ptf          PTF suite only (TARGET=ebpf|bmv2; bmv2 compiles p4src first)"
	@echo "make p4           compile p4src with p4c and diff the committed P4Info (skips without p4c)"
	@echo "make constants    regenerate constants from the P4Info and p4src/common/defines.p4"
	@echo "make bench        run the benchmarks, results in bench/results/"
	@echo "make chaos        random faults for 30 min on two sites with HA at site A, invariants checked live"
	@echo "                  (MINUTES=3 SEED=N KINDS=k1,k2; results in bench/results/chaos.*: bench/chaos/README.md)"
	@echo "make package      Debian packages (switch, gateway, controller, proto) and wheels -> build/packages/"
	@echo "make package-lock resolve packaging/locks/*.txt again (the pinned Python closure of each package)"
	@echo "make package-check make package, then the .debs and wheels read back (fields, contents, venvs import)"
	@echo "make deploy-test  install the packages with apt into fresh Debian 12 containers and run the site"
	@echo "                  (root, the Debian mirror; about 2 minutes, 1 more the first time: packaging/README.md)"
	@echo "make format       format Go, C and Python sources"

deps:
	@.ci/install-deps

# build.sh exits 3 when p4c is absent: a stated skip, recorded as skipped in $(RESULTS)/p4.xml.
# `make p4` always compiles and checks (it is the check); the file target below compiles
# only when the JSON is missing or older than its inputs, so `make test` compiles once.
p4:
	@mkdir -p $(RESULTS)
	@rc=0; p4src/build.sh --junit $(RESULTS)/p4.xml || rc=$$?; [ $$rc -eq 3 ] || exit $$rc

$(P4_JSON): $(P4_INPUTS)
	@rc=0; p4src/build.sh || rc=$$?; [ $$rc -eq 3 ] || exit $$rc

constants: deps
	@$(PY) p4src/gen_constants.py

switch: deps
	@$(MAKE) -s -C targets/ebpf

# The simulated hosts and traffic generator of the two-site emulation (topologies/hostsim).
hostsim: deps
	@$(MAKE) -s -C topologies/hostsim

run: deps switch hostsim
	@$(if $(filter bmv2,$(SWITCH)),$(MAKE) -s $(P4_JSON) && )$(PY) -m topologies.run up$(if $(SWITCH), --switch $(SWITCH))$(if $(TOPO), --topology topologies/$(TOPO).yaml)$(if $(filter-out 0,$(HA)), --replicas 3)$(if $(GATEWAYS), --gateways $(GATEWAYS))$(if $(CLIENTS), --clients $(CLIENTS))$(if $(filter-out 0,$(TLS)), --tls)

mininet: deps switch hostsim
	@$(if $(filter bmv2,$(SWITCH)),$(MAKE) -s $(P4_JSON) && )$(PY) -m topologies.mininet_run$(if $(SWITCH), --switch $(SWITCH))

stop:
	@[ -x $(PY) ] && $(PY) -m topologies.run down || true

test: deps switch
	@rm -rf $(RESULTS) && mkdir -p $(RESULTS)
	@rc=0; \
	 $(MAKE) -s p4 || rc=1; \
	 $(MAKE) -s unit || rc=1; \
	 $(MAKE) -s ptf TARGET=ebpf || rc=1; \
	 $(MAKE) -s ptf TARGET=bmv2 || rc=1; \
	 $(MAKE) -s integration || rc=1; \
	 $(MAKE) -s -k package-check deploy-test || rc=1; \
	 $(PY) .ci/summarize-junit $(RESULTS) --expect commands go go-hostsim mypy mypy-packaging python-unit packaging-unit \
	   p4 ptf ptf-bmv2 python-integration package deploy || rc=1; \
	 exit $$rc

unit: deps
	@mkdir -p $(RESULTS)
	@rc=0; \
	 echo "== unit: every command the project runs comes from a package .ci/install-deps installs"; \
	 $(PY) .ci/check-commands --junit $(RESULTS)/commands.xml || rc=1; \
	 echo "== unit: no import cycles, no private names imported across modules"; \
	 $(PY) .ci/check-imports || rc=1; \
	 echo "== unit: generated constants are current"; \
	 $(PY) p4src/gen_constants.py --check || rc=1; \
	 echo "== unit: Go (eBPF target)"; \
	 $(MAKE) -s -C targets/ebpf test JUNIT=$(CURDIR)/$(RESULTS)/go.xml || rc=1; \
	 echo "== unit: Go (simulated hosts)"; \
	 $(MAKE) -s -C topologies/hostsim test JUNIT=$(CURDIR)/$(RESULTS)/go-hostsim.xml || rc=1; \
	 echo "== unit: Python types (mypy --strict)"; \
	 MYPYPATH=proto:controller:backends:ptf-tests/lib $(PY) -m mypy --strict --ignore-missing-imports --junit-xml $(RESULTS)/mypy.xml \
	   proto/supergw_proto controller/supergw_controller backends/supergw_gateway ptf-tests/lib topologies bench p4src/vectors || rc=1; \
	 echo "== unit: Python types of packaging/ (mypy --strict; module names from packaging/: two conftests)"; \
	 MYPYPATH=packaging:proto:controller:backends $(PY) -m mypy --strict --ignore-missing-imports --explicit-package-bases \
	   --junit-xml $(RESULTS)/mypy-packaging.xml packaging/sgwpkg packaging/sgwdeploy packaging/libexec/gateway_netns.py \
	   packaging/tests packaging/package_tests packaging/deploy_tests || rc=1; \
	 echo "== unit: Python"; \
	 $(PY) -m pytest -q -m "not integration" --junitxml=$(RESULTS)/python-unit.xml proto controller backends p4src ptf-tests/unit topologies bench .ci/tests || rc=1; \
	 echo "== unit: packaging (spec, locks, units, example site, the guide; nothing built)"; \
	 PYTHONPATH=packaging $(PY) -m pytest -q --junitxml=$(RESULTS)/packaging-unit.xml packaging/tests || rc=1; \
	 exit $$rc

ptf: deps switch $(if $(filter bmv2,$(TARGET)),$(P4_JSON))
	@mkdir -p $(RESULTS)
	@echo "== ptf: TARGET=$(TARGET)"
	@ptf-tests/run.sh --target $(TARGET) --xunit $(CURDIR)/$(RESULTS)/ptf$(if $(filter bmv2,$(TARGET)),-bmv2)

# The BMv2 variants load $(P4_JSON) and skip, saying so, without it: a P4 program that does
# not compile (make p4 fails for it) must not stop the eBPF variants.
integration: deps switch hostsim
	@mkdir -p $(RESULTS)
	@$(MAKE) -s $(P4_JSON) || echo "== integration: $(P4_JSON) did not build (output above): the BMv2 variants skip"
	@echo "== integration: real switch, controller and strongSwan in namespaces"
	@$(PY) -m pytest -q -m integration --junitxml=$(RESULTS)/python-integration.xml controller backends topologies bench

bench: deps switch hostsim
	@$(PY) -m bench

chaos: deps switch hostsim
	@$(PY) -m bench.chaos $(if $(MINUTES),--minutes $(MINUTES)) $(if $(SEED),--seed $(SEED)) $(if $(KINDS),--kinds $(KINDS))

# Debian packages and wheels (packaging/README.md): build/packages/*.deb, build/packages/wheels/.
package: deps
	@PYTHONPATH=packaging $(PY) -m sgwpkg build

# The built archives read back with dpkg-deb: what make test checks of the packages.
package-check: package
	@mkdir -p $(RESULTS)
	@echo "== package: the .debs and wheels of build/packages read back"
	@PYTHONPATH=packaging $(PY) -m pytest -q --junitxml=$(RESULTS)/package.xml packaging/package_tests

package-lock: deps
	@PYTHONPATH=packaging $(PY) -m sgwpkg lock

# The packages installed with apt into fresh Debian 12 machines (systemd-nspawn), started by
# their units, and the site of docs/deploy-linux.md checked step by step (packaging/README.md).
deploy-test: package
	@mkdir -p $(RESULTS)
	@echo "== deploy-test: make package's .debs on fresh Debian 12 machines (about 2 minutes; the first run also builds the image)"
	@PYTHONPATH=packaging $(PY) -m pytest -q -s --junitxml=$(RESULTS)/deploy.xml packaging/deploy_tests

format:
	@gofmt -w targets/ebpf topologies/hostsim
	@clang-format -i targets/ebpf/bpf/*.[ch] 2>/dev/null || true

clean:
	@$(MAKE) -s -C targets/ebpf clean
	@$(MAKE) -s -C topologies/hostsim clean
	@rm -rf build
