"""The fault-injection suite, `make chaos`: no pytest module (test_chaos_short.py runs it)."""
