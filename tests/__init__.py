"""Tests for the verification ledger."""
