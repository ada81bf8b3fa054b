"""Swoop benchmark harness: origins, measurement, scenarios and reports (stdlib only)."""
