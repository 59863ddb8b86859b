"""Test stubs: local LLM HTTP servers and in-process scripted providers."""
