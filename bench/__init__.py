"""Benchmarks: `make bench` runs them and writes JSON under bench/results/ (never asserted in tests)."""
