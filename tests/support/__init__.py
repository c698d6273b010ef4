"""Test support: real services started by fixtures."""
