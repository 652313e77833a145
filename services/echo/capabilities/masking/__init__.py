"""Masking of leaked secrets on the outlet, shared by `echo_context` and the pipe models' own outlet.

The detectors are in `echo.domain.masking`.
"""
