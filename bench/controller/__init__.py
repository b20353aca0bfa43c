"""Controller benchmark (python -m bench.controller): see README.md beside this file."""
