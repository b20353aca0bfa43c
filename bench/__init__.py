"""supergw benchmarks: `python -m bench` runs dataplane, controller and gateway in turn.

Each benchmark writes bench/results/<name>.{json,md,png} through bench.report.
"""
