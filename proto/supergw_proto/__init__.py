"""supergw's shared contracts: wire formats, P4 names, bucket math, strict config models.

Every supergw program (switch tests, controller, gateway agent, emulation, benchmarks)
imports these from here, so installing one program never pulls in another's dependencies.
"""
