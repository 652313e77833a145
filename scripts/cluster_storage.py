"""The single-node tier's volume provisioner: a PersistentVolume on a host folder for every claim.

No provisioner image exists here (kind ships local-path-provisioner; this tier builds everything). This
one polls the API once a second: each Pending PersistentVolumeClaim of the default StorageClass
`standard` (provisioner `echo.dev/host-path`, created at start) gets a hostPath PersistentVolume under
VOLUMES/<namespace>-<claim>-<uid8>, pre-bound to it (claimRef) with the claim's size and access modes;
a Released volume with reclaim policy Delete is deleted with its folder. The folders are mode 0777:
hostPath volumes get no fsGroup, and the pods run as their own non-root users.

Usage: python3 cluster_storage.py KUBECONFIG VOLUMES   (stdlib only: it runs on the host's python3)
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import Any

from cluster_api import Api

POLL_SECONDS = 1.0
CLASS = "standard"
PROVISIONER = "echo.dev/host-path"

STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "provisioner": PROVISIONER,
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "Immediate",
}


def wants_a_volume(claim: dict[str, Any]) -> bool:
    spec = claim.get("spec", {})
    return (
        claim.get("status", {}).get("phase") == "Pending"
        and not spec.get("volumeName")
        and spec.get("storageClassName") in (CLASS, None)
        and not claim["metadata"].get("deletionTimestamp")
    )


def volume_for(claim: dict[str, Any], volumes: str) -> tuple[dict[str, Any], str]:
    meta = claim["metadata"]
    name = f"pvc-{meta['uid']}"
    folder = os.path.join(volumes, f"{meta['namespace']}-{meta['name']}-{meta['uid'][:8]}")
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
        "spec": {
            "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
            "accessModes": claim["spec"].get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": CLASS,
            "hostPath": {"path": folder, "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }
    return volume, folder


def reconcile(api: Api, volumes: str) -> None:
    for claim in api.get("/api/v1/persistentvolumeclaims")["items"]:
        if wants_a_volume(claim):
            volume, folder = volume_for(claim, volumes)
            os.makedirs(folder, exist_ok=True)
            os.chmod(folder, 0o777)
            if api.create("/api/v1/persistentvolumes", volume):
                print(f"cluster_storage: {volume['metadata']['name']} for {folder}", flush=True)
    for volume in api.get("/api/v1/persistentvolumes")["items"]:
        spec = volume["spec"]
        released = volume.get("status", {}).get("phase") in ("Released", "Failed")
        ours = volume["metadata"].get("annotations", {}).get("pv.kubernetes.io/provisioned-by") == PROVISIONER
        if ours and released and spec.get("persistentVolumeReclaimPolicy") == "Delete":
            folder = spec.get("hostPath", {}).get("path", "")
            if folder.startswith(volumes + os.sep):
                shutil.rmtree(folder, ignore_errors=True)
            api.delete(f"/api/v1/persistentvolumes/{volume['metadata']['name']}")
            print(f"cluster_storage: deleted {volume['metadata']['name']}", flush=True)


def main() -> None:
    api, volumes = Api(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(volumes, exist_ok=True)
    api.create("/apis/storage.k8s.io/v1/storageclasses", STORAGE_CLASS)
    while True:
        try:
            reconcile(api, volumes)
        except OSError as error:  # the apiserver restarting, a conflict: next round
            print(f"cluster_storage: {error}", file=sys.stderr, flush=True)
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    main()
