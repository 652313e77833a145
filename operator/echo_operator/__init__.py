"""The ECHO Kubernetes operator (kopf): one EchoDeployment = one tenant.

render is pure: `render(name, namespace, spec) -> list of manifest dicts` does no I/O, reads no
clock and no environment; the kopf handlers stay thin (validate, render, server-side apply,
adopt, prune, write status). Modules, from the inside out:

- `shapes`, `models`, `connections`, `spec`: the spec as pydantic models (the CRD's source, CEL
  rules mirrored in Python);
- `crd`: the CRD generator (`python -m echo_operator.crd`), with and without its CEL rules;
- `render`: the pure manifest builders, a package: `render.render()` assembles them; `tenant` (names,
  labels, ports), `pods` (what every pod shares), `modes` (what each mode, distributed or standalone,
  ignores) and one module per kind of child (`config`, `hooks`, `embedding`, `qdrant`, `distiller`,
  `monitoring`, `network`, `openwebui`, `standalone`: the one pod of a standalone tenant);
- `status`: pure conditions from the children's state;
- `kube`: the operator's one Kubernetes API client (every request it makes, errors as `ApiError`);
- `apply`, `children`: children mapped onto the cluster's API versions, then applied, pruned, observed;
- `handlers`, `settings`, `metrics`, `runner`: the kopf wiring and the process.

import-linter's contract `pure-render` keeps `render` and `status` off kopf, the API client and HTTP.
"""

__all__: list[str] = []  # import the modules: `from echo_operator import render; render.render(...)`
