"""The API server of the single-node tier, for its host-side helpers (cluster_dns.py, cluster_storage.py).

Standard library only: they run on the host's python3, outside the project's venv. The kubeconfig is the
one scripts/kube-apiserver.sh writes (flow-style, a bearer token, the apiserver's self-signed certificate).
"""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from typing import Any


class Api:
    def __init__(self, kubeconfig: str) -> None:
        with open(kubeconfig, encoding="utf-8") as handle:
            text = handle.read()
        server = re.search(r'server: "([^"]+)"', text)
        token = re.search(r'token: "([^"]+)"', text)
        if server is None or token is None:
            raise SystemExit(f"no server or token in {kubeconfig}")
        self.server, self.token = server.group(1), token.group(1)
        self.context = ssl.create_default_context()
        self.context.check_hostname = False
        self.context.verify_mode = ssl.CERT_NONE  # the apiserver's self-signed certificate, on this machine

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        request = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=10, context=self.context) as response:
            return json.load(response)

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def create(self, path: str, body: dict[str, Any]) -> bool:
        """POST `body`; False when it already exists (409)."""
        try:
            self.request("POST", path, body)
        except urllib.error.HTTPError as error:
            if error.code == 409:
                return False
            raise
        return True

    def delete(self, path: str) -> None:
        try:
            self.request("DELETE", path)
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise
