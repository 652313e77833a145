"""ECHO runtime: the hook service, the distiller and their shared domain.

Layers: domain modules (pure, no I/O) <- adapters (ports to the outside) <- apps (hooks, cli).
"""

__version__ = "0.1.0"
