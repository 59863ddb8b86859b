"""Shared pytest configuration: the service fixtures (PostgreSQL, broker, Redis)."""

pytest_plugins = ["tests.fixtures.services"]
