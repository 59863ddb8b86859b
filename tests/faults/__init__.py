"""Fault-injection and fuzz tests (issue 9): crashes, outages, restarts, poison floods, hostile input."""
