"""The ECHO Kubernetes operator (kopf). Filled in by the operator issue."""
