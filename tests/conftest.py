"""Shared pytest set-up: the wheel toolchain on PATH for every test."""
from zoforge.sim.toolchain import apply_toolchain_env

apply_toolchain_env()
