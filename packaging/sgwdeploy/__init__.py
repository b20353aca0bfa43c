"""`make deploy-test`: supergw's packages installed with apt into fresh Debian 12 machines
(systemd-nspawn containers booting systemd), each role its own machine on its own network
namespace, started by the packaged units; see packaging/README.md, "make deploy-test"."""
