"""The ECHO Kubernetes operator (kopf): one EchoDeployment = one tenant.

render is pure: `render(name, namespace, spec) -> list of manifest dicts` does no I/O, reads no
clock and no environment; the kopf handlers stay thin (validate, render, server-side apply,
adopt, prune, write status). Modules, from the inside out:

- `shapes`, `models`, `connections`, `spec`: the spec as pydantic models (the CRD's source, CEL
  rules mirrored in Python); `modes`: what each mode (distributed, standalone) ignores;
- `crd`: the CRD generator (`python -m echo_operator.crd`), with and without its CEL rules;
- `tenant`, `pods`, `render_*`, `render`: pure manifest builders, one module per kind of child
  (`render_standalone`: the one pod of a standalone tenant);
- `status`: pure conditions from the children's state;
- `kube`: the operator's one Kubernetes API client (every request it makes, errors as `ApiError`);
- `apply`, `children`: children mapped onto the cluster's API versions, then applied, pruned, observed;
- `handlers`, `settings`, `metrics`, `runner`: the kopf wiring and the process.
"""

__all__: list[str] = []  # import the modules: `from echo_operator import render; render.render(...)`
