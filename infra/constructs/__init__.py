"""Constructs composed by ``infra.host_stack.HostStack``."""
