"""Imperative shell: builds ports from settings and applies the effects the core decides."""
