#!/usr/bin/python3
"""strict_fields.py - unknown fields in Kubernetes objects, as the API server's
strict field validation (kubectl apply's default since 1.27) refuses them.

kubernetes-models (validate.mjs) checks types, required fields and formats
but lets unknown fields through, so a misspelt key (hostPid, readonly) would
pass it and be dropped or refused by the cluster. This walks each object
along the typed models of Debian's python3-kubernetes (openapi_types and
attribute_map of every class) and names every key the model does not have.
Kinds without a model there (the operator's CRDs) are left to validate.mjs.
Reads a JSON array on stdin; exit 1 on any unknown field."""
import json
import sys

import kubernetes.client as k

GROUPS = {"v1": "V1", "apps/v1": "V1", "rbac.authorization.k8s.io/v1": "V1"}


def model_for(api_version, kind):
    prefix = GROUPS.get(api_version)
    return getattr(k, prefix + kind, None) if prefix else None


def walk(obj, typ, path, errs):
    if obj is None:
        return
    if typ.startswith("list["):
        if isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, typ[5:-1], f"{path}[{i}]", errs)
        return
    if typ.startswith("dict("):
        if isinstance(obj, dict):
            inner = typ[5:-1].split(", ", 1)[1]
            for key, v in obj.items():
                walk(v, inner, f"{path}.{key}", errs)
        return
    cls = getattr(k, typ, None)
    if cls is None or not hasattr(cls, "attribute_map") or not isinstance(obj, dict):
        return  # scalars, object (free-form), quantities, int-or-string
    names = {v: a for a, v in cls.attribute_map.items()}
    for key, v in obj.items():
        if key not in names:
            errs.append(f"{path}.{key}: unknown field (not in {typ})")
            continue
        walk(v, cls.openapi_types[names[key]], f"{path}.{key}", errs)


def main():
    objs = json.load(sys.stdin)
    bad = 0
    for o in objs:
        where = f"{o.get('kind')}/{o.get('metadata', {}).get('name')}"
        cls = model_for(o.get("apiVersion"), o.get("kind"))
        if cls is None:
            print(f"not covered {where} ({o.get('apiVersion')}): no typed model")
            continue
        errs = []
        walk(o, cls.__name__, where, errs)
        for e in errs:
            print(f"UNKNOWN FIELD {e}")
        bad += len(errs)
        if not errs:
            print(f"strict ok {where}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
